// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Tests of the ccall checker: the real header and module, then snippets
// that are deliberately wrong in one way each.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { parseHeader, parseVendorHeader, checkJuliaSource, checkJuliaSources } = require('../lib');
const { CUDA_JL_EXPORTS, readNameList } = require('../rules');
const { BLOCKING } = require('../ccall-macro');

const root = path.join(__dirname, '..', '..', '..', '..');
const headerText = fs.readFileSync(path.join(root, 'include', 'tenferro_gpu.h'), 'utf8');
const header = parseHeader(headerText);

// cuBLAS's own header, where the build machine has the CUDA Toolkit
// (make check-julia needs it: the library is built against it).
const cudaHome = process.env.CUDA_HOME || '/usr/local/cuda';
const cublasHeader = path.join(cudaHome, 'include', 'cublas_api.h');
const vendor = fs.existsSync(cublasHeader) ? parseVendorHeader(fs.readFileSync(cublasHeader, 'utf8')) : null;

function problemsOf(snippet, withVendor = vendor) {
  return checkJuliaSource(snippet, header, 'snippet.jl', 'libtenferro', withVendor).problems;
}

// Exactly one problem, and it contains each fragment.
function rejects(snippet, ...fragments) {
  const problems = problemsOf(snippet);
  rejectsWith(problems, ...fragments);
}

function rejectsWith(problems, ...fragments) {
  assert.strictEqual(problems.length, 1, `want one problem, got ${JSON.stringify(problems)}`);
  for (const f of fragments) assert.ok(problems[0].includes(f), `'${problems[0]}' lacks '${f}'`);
}

test('the header: every TF_API declaration is a prototype', () => {
  // A declaration's line starts with TF_API, after its attribute macros.
  const declared = headerText.split('\n').filter((l) => /^(?:TF_[A-Z_]+ )*TF_API /.test(l)).length;
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

test('the header: function-pointer parameters carry their signatures', () => {
  const enqueue = header.prototypes.tf_cublas_enqueue.params[2];
  assert.ok(enqueue.fnptr);
  assert.strictEqual(enqueue.sig.ret.base, 'int32_t');
  assert.deepStrictEqual(enqueue.sig.params.map((p) => [p.base, p.pointers, p.name]),
    [['void', 1, 'cublas_handle'], ['void', 1, 'stream'], ['void', 1, 'user_data']]);
  const release = header.prototypes.tf_workspace_retire.params[2];
  assert.strictEqual(release.sig.ret.base, 'void');
  assert.strictEqual(release.sig.params.length, 2);
  const log = header.prototypes.tf_set_log_callback.params[0]; // through the tf_log_fn typedef
  assert.deepStrictEqual(log.sig.params.map((p) => [p.base, p.pointers, p.isConst]),
    [['int32_t', 0, false], ['char', 1, true], ['void', 1, false]]);
});

test('the header: sizes written as shifted casts are constants', () => {
  assert.strictEqual(header.constants.TF_MAX_DOWNLOAD_CHUNK_BYTES, 256 * 1024 * 1024);
  assert.strictEqual(header.constants.TF_DEFAULT_CUBLAS_WORKSPACE_BYTES, 32 * 1024 * 1024);
  assert.strictEqual(header.constants.TF_SCALAR_DOWNLOAD_MAX_BYTES, 16);
});

test('the module: every ccall, callback and struct matches the headers', { skip: !vendor && 'no cublas_api.h' }, () => {
  const src = path.join(root, 'bindings', 'julia', 'src');
  const files = fs.readdirSync(src).filter((x) => x.endsWith('.jl'))
    .map((f) => ({ file: f, text: fs.readFileSync(path.join(src, f), 'utf8') }));
  const r = checkJuliaSources(files, header, {
    vendor, requireCallbacks: true, gcSafe: BLOCKING, exportClashes: readNameList(CUDA_JL_EXPORTS),
  });
  assert.deepStrictEqual(r.problems, []);
  assert.ok(r.ccalls.length >= 69, `only ${r.ccalls.length} ccalls found`);
  assert.deepStrictEqual(r.gcSafe.sort(), [...BLOCKING].sort());
  assert.deepStrictEqual(r.callbacks.sort(), ['tf_cublas_enqueue:fn', 'tf_set_log_callback:fn',
    'tf_stream_enqueue:fn', 'tf_with_context:fn', 'tf_workspace_retire:release']);
  for (const s of ['tf_runtime_options', 'tf_retirement_stats', 'tf_launch_config', 'tf_compile_options']) {
    assert.ok(r.structs.includes(s), `struct ${s} not checked`);
  }
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
  rejects('f() = ccall(:tf_version, UInt32, ())', 'write the function as (:tf_name, libtenferro)');
  rejects('f() = ccall((:tf_version, "libother"), UInt32, ())', 'the library must be libtenferro');
  rejects('f(r) = ccall((:tf_runtime_sync, libtenferro), Int32, (Ptr{tf_runtime},), r', 'syntax error');
});

test('structs must match the header field by field', () => {
  const good = fs.readFileSync(path.join(root, 'bindings', 'julia', 'src', 'LibTenferro.jl'), 'utf8')
    .match(/struct tf_runtime_options\n[\s\S]*?\nend/)[0];
  assert.deepStrictEqual(problemsOf(good), []);
  rejects(good.replace('flags::UInt32', 'flags::UInt64'), 'field 5 is flags::UInt64', 'uint32_t flags');
  rejects(good.replace('    memory_reserved_limit::UInt64\n', ''), 'has 8 fields, the header\'s 9');
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

// ---- callbacks -----------------------------------------------------------------

const withContextWrapper = 'w(rt, fn, d) = ccall((:tf_with_context, libtenferro), Int32, ' +
  '(Ptr{tf_runtime}, Ptr{Cvoid}, Ptr{Cvoid}), rt, fn, d)\n';
const logWrapper = 'lg(fn, d) = ccall((:tf_set_log_callback, libtenferro), Int32, (Ptr{Cvoid}, Ptr{Cvoid}), fn, d)\n';

test('callbacks: a matching @cfunction, in place or bound to a name, and C_NULL pass', () => {
  for (const ok of [
    withContextWrapper + 'tr(d::Ptr{Cvoid})::Int32 = 0\nfunction use(p)\n t = @cfunction(tr, Int32, (Ptr{Cvoid},))\n w(p, t, C_NULL)\nend',
    withContextWrapper + 'tr(d) = 0\nuse(p) = L.w(p, @cfunction(tr, Cint, (Ptr{Cvoid},)), C_NULL)',
    withContextWrapper + 'function use(p)\n t = @cfunction(tr, Int32, (Ptr{Cvoid},))\n f() do x\n  w(p, t, x)\n end\nend\n' +
      'function tr(d::Ptr{Cvoid})::Int32\n return 0\nend',
    logWrapper + 'lt(l::Int32, m::Cstring, d::Ptr{Cvoid})::Cvoid = nothing\n' +
      'use() = lg(@cfunction(lt, Cvoid, (Int32, Cstring, Ptr{Cvoid})), C_NULL)\nnone() = lg(C_NULL, C_NULL)',
  ]) assert.deepStrictEqual(problemsOf(ok), [], ok);
});

test('callbacks: a @cfunction of the wrong type is refused', () => {
  const tr = 'tr(d) = 0\n';
  rejects(withContextWrapper + tr + 'use(p) = w(p, @cfunction(tr, Cvoid, (Ptr{Cvoid},)), C_NULL)',
    "tf_with_context's fn returns int32_t", 'says Cvoid');
  rejects(withContextWrapper + 'tr(a, b) = 0\nuse(p) = w(p, @cfunction(tr, Int32, (Ptr{Cvoid}, Ptr{Cvoid})), C_NULL)',
    'takes 1 arguments: the @cfunction lists 2');
  rejects(logWrapper + 'lt(l, m, d) = nothing\nuse() = lg(@cfunction(lt, Cvoid, (Int64, Cstring, Ptr{Cvoid})), C_NULL)',
    "tf_set_log_callback's fn argument 1 (level) is int32_t", 'says Int64');
  rejects(logWrapper + 'lt(l, m, d) = nothing\nuse() = lg(@cfunction(lt, Cvoid, (Int32, Ref{UInt8}, Ptr{Cvoid})), C_NULL)',
    'argument 2 (message) is const char*');
});

test('callbacks: the Julia function must take what the @cfunction passes', () => {
  rejects(withContextWrapper + 'tr(d::Ptr{UInt8})::Int32 = 0\nuse(p) = w(p, @cfunction(tr, Int32, (Ptr{Cvoid},)), C_NULL)',
    'tr(d::Ptr{UInt8})::Int32', 'does not take (Ptr{Cvoid}) returning Int32');
  rejects(withContextWrapper + 'tr(d::Ptr{Cvoid})::Cvoid = nothing\nuse(p) = w(p, @cfunction(tr, Int32, (Ptr{Cvoid},)), C_NULL)',
    'does not take');
  rejects(withContextWrapper + 'use(p) = w(p, @cfunction(elsewhere, Int32, (Ptr{Cvoid},)), C_NULL)',
    'names elsewhere, which the checked sources do not define');
});

test('callbacks: a value the checker cannot see is refused', () => {
  rejects(withContextWrapper + 'use(p, fnptr) = w(p, fnptr, C_NULL)', "tf_with_context's fn: pass C_NULL or a @cfunction", 'not fnptr');
  rejects(withContextWrapper + 'use(p) = w(p, Ptr{Cvoid}(1), C_NULL)', 'not Ptr{Cvoid}(1)');
});

test('callbacks: with requireCallbacks every callback parameter needs a verified @cfunction', () => {
  const r = checkJuliaSources([{ file: 'a.jl', text: withContextWrapper + 'use(p) = w(p, C_NULL, C_NULL)' }],
    header, { requireCallbacks: true });
  rejectsWith(r.problems, "tf_with_context's fn: no call of w passes a @cfunction the checker verified");
  // Across files: the wrapper in one, its call in another.
  const ok = checkJuliaSources([{ file: 'lib.jl', text: withContextWrapper },
    { file: 'use.jl', text: 'tr(d::Ptr{Cvoid})::Int32 = 0\nuse(p) = L.w(p, @cfunction(tr, Int32, (Ptr{Cvoid},)), C_NULL)' }],
  header, { requireCallbacks: true });
  assert.deepStrictEqual(ok.problems, []);
  assert.deepStrictEqual(ok.callbacks, ['tf_with_context:fn']);
});

// ---- ccalls through cuBLAS function pointers ------------------------------------

const sgemm = 'cublasSgemm_v2(fn, h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc) = ccall(fn, Int32, ' +
  '(Ptr{Cvoid}, Int32, Int32, Cint, Cint, Cint, Ptr{Float32}, Ptr{Float32}, Cint, Ptr{Float32}, Cint, ' +
  'Ptr{Float32}, Ptr{Float32}, Cint), h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc)';

test('vendor ccalls are checked against cuBLAS\'s header', { skip: !vendor && 'no cublas_api.h' }, () => {
  assert.deepStrictEqual(problemsOf(sgemm), []);
  const p = vendor.find('cublasDgemm_v2');
  assert.deepStrictEqual(p.params.map((x) => [x.base, x.pointers]).slice(0, 7),
    [['cublasContext', 1], ['int', 0], ['int', 0], ['int', 0], ['int', 0], ['int', 0], ['double', 1]]);
  rejects(sgemm.replace('Ptr{Float32}, Ptr{Float32}, Cint, Ptr{Float32}', 'Ptr{Float32}, Ptr{Float64}, Cint, Ptr{Float32}'),
    'cublasSgemm_v2 argument 8 (A) is const float*', 'says Ptr{Float64}');
  rejects(sgemm.replace('Cint, Cint, Cint, Ptr', 'Int64, Cint, Cint, Ptr'), 'argument 4 (m) is int');
  rejects(sgemm.replace('= ccall(fn, Int32,', '= ccall(fn, Cvoid,'), 'cublasSgemm_v2 returns int');
  rejects(sgemm.replace(/^cublasSgemm_v2/, 'mygemm'), 'mygemm is not declared in the vendor header');
  rejects(sgemm.replace('(fn, h,', '(h, fn,'), "the function pointer 'fn' must be the wrapper's first parameter");
});

test('a ccall through a pointer without a vendor header is refused', () => {
  rejectsWith(problemsOf(sgemm, null), "ccall through the pointer 'fn' in cublasSgemm_v2: no vendor header");
});

test('the structs the stream-work and transfer sections added', () => {
  const text = fs.readFileSync(path.join(root, 'bindings', 'julia', 'src', 'LibTenferro.jl'), 'utf8');
  const struct = (name) => text.match(new RegExp(`struct ${name}\\n[\\s\\S]*?\\nend`))[0];
  rejects(struct('tf_compile_options').replace('options::Ptr{Ptr{UInt8}}', 'options::Ptr{UInt8}'),
    'field 5 is options::Ptr{UInt8}', 'const char** options');
  rejects(struct('tf_retirement_stats').replace('    max_in_flight::UInt64\n', ''), "has 7 fields, the header's 8");
  rejects(struct('tf_launch_config').replace('block_z::UInt32', 'block_z::Int32'), 'field 7 is block_z::Int32');
  rejects(struct('tf_runtime_options').replace('download_threads::UInt32', 'download_threads::UInt64'),
    'field 6 is download_threads::UInt64');
});

test('names: exports must be defined, L.name must exist in LibTenferro', () => {
  const lib = 'module LibTenferro\nconst TF_OK = Int32(0)\ntf_version() = ccall((:tf_version, libtenferro), UInt32, ())\nend\n';
  assert.deepStrictEqual(problemsOf(lib + 'export f, S\nf() = L.tf_version()\nstruct S end\ng() = L.TF_OK'), []);
  rejects(lib + 'export f, h\nf() = 1', 'exports h, which is not defined');
  rejects(lib + 'f() = L.tf_versoin()', 'L.tf_versoin: LibTenferro defines no tf_versoin');
  const r = checkJuliaSources([{ file: 'lib.jl', text: lib }], header,
    { others: [{ file: 'test.jl', text: 'x = L.TF_ERROR_NOPE' }] });
  rejectsWith(r.problems, 'test.jl:1:5: L.TF_ERROR_NOPE: LibTenferro defines no TF_ERROR_NOPE');
});

test('sources longer than 32 KiB parse', () => {
  const big = Array.from({ length: 3000 }, (_, i) => `f${i}(x) = x + ${i} # padding the file out`).join('\n');
  assert.ok(big.length > 64 * 1024);
  assert.deepStrictEqual(checkJuliaSource(big, header).problems, []);
});
