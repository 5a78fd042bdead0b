'use strict';
// Tests of the ccall checker: the real header and module, then snippets
// that are deliberately wrong in one way each.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { parseHeader, checkJuliaSource } = require('../lib');

const root = path.join(__dirname, '..', '..', '..', '..');
const headerText = fs.readFileSync(path.join(root, 'include', 'tenferro_gpu.h'), 'utf8');
const header = parseHeader(headerText);

function problemsOf(snippet) {
  return checkJuliaSource(snippet, header, 'snippet.jl').problems;
}

// Exactly one problem, and it contains each fragment.
function rejects(snippet, ...fragments) {
  const problems = problemsOf(snippet);
  assert.strictEqual(problems.length, 1, `want one problem, got ${JSON.stringify(problems)}`);
  for (const f of fragments) assert.ok(problems[0].includes(f), `'${problems[0]}' lacks '${f}'`);
}

test('the header: every TF_API declaration is a prototype', () => {
  const declared = headerText.split('\n').filter((l) => l.startsWith('TF_API ')).length;
  assert.strictEqual(Object.keys(header.prototypes).length, declared);
  const p = header.prototypes.tf_runtime_new_with_options;
  assert.deepStrictEqual(p.params.map((x) => [x.base, x.pointers, x.isConst]),
    [['int32_t', 0, false], ['tf_runtime_options', 1, true], ['tf_runtime', 2, false]]);
  assert.strictEqual(p.ret.base, 'int32_t'); // tf_status resolved
  assert.ok(header.prototypes.tf_with_context.params[1].fnptr);
  assert.ok(header.prototypes.tf_set_log_callback.params[0].fnptr); // through the tf_log_fn typedef
  assert.deepStrictEqual(header.prototypes.tf_version.params, []);
  assert.strictEqual(header.structFields.tf_device_properties[2].array, 256);
});

test('the module: every ccall and struct matches the header', () => {
  let ccalls = 0;
  const src = path.join(root, 'bindings', 'julia', 'src');
  for (const f of fs.readdirSync(src).filter((x) => x.endsWith('.jl'))) {
    const r = checkJuliaSource(fs.readFileSync(path.join(src, f), 'utf8'), header, f);
    assert.deepStrictEqual(r.problems, []);
    ccalls += r.ccalls.length;
  }
  assert.ok(ccalls >= 27, `only ${ccalls} ccalls found`);
});

test('accepted spellings', () => {
  for (const ok of [
    'f() = ccall((:tf_version, libtenferro), UInt32, ())',
    'f(o) = ccall((:tf_device_count, libtenferro), Cint, (Ptr{Cint},), o)',
    'f(i) = ccall((:tf_last_error, libtenferro), Int32, (Ptr{tf_error_info},), i)',
    'f(o) = ccall((:tf_runtime_new, libtenferro), Int32, (Int32, Ref{Ptr{Cvoid}}), 0, o)',
    'f() = ccall((:tf_version_string, libtenferro), Ptr{UInt8}, ())',
    'f(s) = ccall((:tf_status_string, libtenferro), Cstring, (Cint,), s)',
    'f(r) = ccall((:tf_runtime_sync, libtenferro), Int32, (Ptr{Cvoid},), r)',
  ]) assert.deepStrictEqual(problemsOf(ok), [], ok);
});

test('a function the header does not declare', () => {
  rejects('f() = ccall((:tf_versionn, libtenferro), UInt32, ())', 'tf_versionn is not a function of the header');
});

test('a wrong return type', () => {
  rejects('f(r) = ccall((:tf_runtime_sync, libtenferro), UInt32, (Ptr{tf_runtime},), r)',
    'tf_runtime_sync returns int32_t', 'says UInt32');
  rejects('f() = ccall((:tf_version_string, libtenferro), Ref{UInt8}, ())', 'returns const char*');
  rejects('f() = ccall((:tf_clear_last_error, libtenferro), Int32, ())', 'returns void');
});

test('a wrong argument type', () => {
  rejects('f(o) = ccall((:tf_runtime_new, libtenferro), Int32, (Int64, Ref{Ptr{tf_runtime}}), 0, o)',
    'argument 1 (ordinal) is int32_t', 'says Int64');
  rejects('f(o) = ccall((:tf_device_count, libtenferro), Int32, (Ref{UInt32},), o)',
    'argument 1 (out_count) is int32_t*');
  // An untyped pointer where the header has a typed one.
  rejects('f(o) = ccall((:tf_device_count, libtenferro), Int32, (Ptr{Cvoid},), o)', 'int32_t*');
  rejects('f(o) = ccall((:tf_runtime_new, libtenferro), Int32, (Int32, Ref{tf_runtime}), 0, o)',
    'argument 2 (out) is tf_runtime**');
  rejects('f(r, x) = ccall((:tf_runtime_supports, libtenferro), Int32, (Ptr{tf_runtime}, Int32, Ref{Int32}), r, 1, x)' +
    '\ng(f) = ccall((:tf_with_context, libtenferro), Int32, (Ptr{tf_runtime}, Ref{Cvoid}, Ptr{Cvoid}), C_NULL, f, C_NULL)',
    'tf_with_context argument 2 (fn) is a function pointer');
  rejects('f(d) = ccall((:tf_runtime_device_info, libtenferro), Int32, (Ptr{tf_runtime}, Ref{tf_error_info}), C_NULL, d)',
    'argument 2 (out) is tf_device_properties*');
});

test('a wrong number of arguments', () => {
  rejects('f(r) = ccall((:tf_runtime_bind_slot, libtenferro), Int32, (Ptr{tf_runtime}, Ref{Ptr{tf_runtime}}), r, o)',
    'takes 3 arguments', 'lists 2 types');
  rejects('f(r) = ccall((:tf_runtime_sync, libtenferro), Int32, (Ptr{tf_runtime},), r, 1)',
    '1 argument types but 2 arguments');
});

test('forms the checker cannot verify are refused', () => {
  rejects('f(r) = ccall((:tf_runtime_sync, libtenferro), Int32, (Ptr{tf_runtime}), r)', 'must be a tuple literal');
  rejects('f() = @ccall libtenferro.tf_version()::UInt32', 'not @ccall');
  rejects('f() = ccall(:tf_version, UInt32, ())', 'write the function as (:tf_name, libtenferro)');
  rejects('f() = ccall((:tf_version, "libother"), UInt32, ())', 'the library must be libtenferro');
  rejects('f(r) = ccall((:tf_runtime_sync, libtenferro), Int32, (Ptr{tf_runtime},), r', 'syntax error');
});

test('structs must match the header field by field', () => {
  const good = fs.readFileSync(path.join(root, 'bindings', 'julia', 'src', 'LibTenferro.jl'), 'utf8')
    .match(/struct tf_runtime_options\n[\s\S]*?\nend/)[0];
  assert.deepStrictEqual(problemsOf(good), []);
  rejects(good.replace('flags::UInt32', 'flags::UInt64'), 'field 5 is flags::UInt64', 'uint32_t flags');
  rejects(good.replace('    flags::UInt32\n', ''), 'has 4 fields, the header\'s 5');
  const swapped = problemsOf(good.replace('stream_slots::UInt32\n    cublas_workspace_bytes::UInt64',
    'cublas_workspace_bytes::UInt64\n    stream_slots::UInt32'));
  assert.strictEqual(swapped.length, 2);
  assert.ok(swapped[0].includes('field 2') && swapped[1].includes('field 3'));
  rejects('struct tf_error_info\n struct_size::UInt32\n status::Int32\n code_domain::Int32\n code::Int32\n' +
    ' operation::NTuple{64,UInt8}\n call::NTuple{64,UInt8}\n message::NTuple{256,UInt8}\nend', 'NTuple{512,UInt8}');
});

test('constants must have the values of the header', () => {
  assert.deepStrictEqual(problemsOf('const TF_ERROR_CUDA = Int32(8)\nconst TF_ERROR_NAME_CAPACITY = 64\nconst OTHER = 5'), []);
  rejects('const TF_ERROR_CUDA = Int32(9)', 'TF_ERROR_CUDA is 8 in the header');
  rejects('const TF_CAP_CUBLAS = 7', 'TF_CAP_CUBLAS is 6');
  rejects('const TF_DEVICE_NAME_CAPACITY = 255', 'is 256');
});
