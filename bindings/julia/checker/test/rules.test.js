// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Tests of the checker's newer rules: @ccall (gc_safe and where Julia loads
// it), exports that clash with CUDA.jl's, rethrows that lose backtraces,
// names of the module used elsewhere, package extensions.
// Each wrong snippet is wrong in one way and must give exactly one problem.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { parseHeader, checkJuliaSources, parseJulia } = require('../lib');
const { CUDA_JL_EXPORTS, readNameList } = require('../rules');
const { BLOCKING } = require('../ccall-macro');
const { checkProject, readToml } = require('../project');

const root = path.join(__dirname, '..', '..', '..', '..');
const header = parseHeader(fs.readFileSync(path.join(root, 'include', 'tenferro_gpu.h'), 'utf8'));

function problemsOf(snippet, options = {}) {
  return checkJuliaSources([{ file: 'snippet.jl', text: snippet }], header, options).problems;
}

function rejects(snippet, ...fragments) {
  rejectsWith(problemsOf(snippet), ...fragments);
}

function rejectsWith(problems, ...fragments) {
  assert.strictEqual(problems.length, 1, `want one problem, got ${JSON.stringify(problems)}`);
  for (const f of fragments) assert.ok(problems[0].includes(f), `'${problems[0]}' lacks '${f}'`);
}

// ---- @ccall ------------------------------------------------------------------

const guarded = (body, cond = 'VERSION >= v"1.12"') => `@static if ${cond}\n    ${body}\nend\n`;
const syncAt = 'f(rt) = @ccall gc_safe=true libtenferro.tf_runtime_sync(rt::Ptr{tf_runtime})::Int32';

test('@ccall: checked like ccall, gc_safe where Julia 1.12 or later loads it', () => {
  for (const ok of [
    'f() = @ccall libtenferro.tf_version()::UInt32',
    'f(o) = @ccall libtenferro.tf_device_count(o::Ref{Int32})::Cint',
    guarded(syncAt),
    guarded(syncAt, 'VERSION >= v"1.13.0-DEV.100"'),
    guarded(syncAt, 'VERSION > v"1.12"'),
    `@static if VERSION >= v"1.12"\n    ${syncAt}\nelse\n    g() = 1\nend`,
    guarded('f(e) = @ccall gc_safe=false libtenferro.tf_event_synchronize(e::Ptr{tf_event})::Int32'),
    guarded('f(r, s, d, n) = @ccall gc_safe=true libtenferro.tf_download(r::Ptr{tf_runtime}, s::UInt64, ' +
      'd::Ptr{Cvoid}, n::Csize_t)::Int32'),
  ]) assert.deepStrictEqual(problemsOf(ok), [], ok);
  // Outside any guard, gc_safe=false is loaded by any Julia.
  assert.deepStrictEqual(problemsOf('f(e) = @ccall gc_safe=false libtenferro.tf_event_synchronize(e::Ptr{tf_event})::Int32'), []);
});

test('@ccall: wrong types and counts', () => {
  rejects(guarded(syncAt.replace('::Int32', '::UInt32')), 'tf_runtime_sync returns int32_t', 'the @ccall says UInt32');
  rejects(guarded(syncAt.replace('rt::Ptr{tf_runtime}', 'rt::Ptr{tf_event}')),
    'tf_runtime_sync argument 1 (rt) is tf_runtime*', 'the @ccall says Ptr{tf_event}');
  rejects(guarded(syncAt.replace('rt::Ptr{tf_runtime}', 'rt::Ptr{tf_runtime}, x::Int32')),
    'takes 1 arguments: the @ccall lists 2 types');
  rejects('f() = @ccall libtenferro.tf_versoin()::UInt32', 'tf_versoin is not a function of the header');
});

test('@ccall: gc_safe=true must sit in the first branch of @static if VERSION >= v"1.12"', () => {
  const why = '@ccall gc_safe=true needs Julia 1.12';
  rejects(syncAt, why);
  rejects(guarded(syncAt, 'VERSION >= v"1.11"'), why);
  rejects(guarded(syncAt, 'VERSION < v"1.12"'), why);
  rejects(guarded(syncAt, 'Sys.islinux()'), why);
  rejects(`@static if VERSION >= v"1.12"\n    g() = 1\nelse\n    ${syncAt}\nend`, why);
  rejects(`@static if VERSION >= v"1.11"\n    g() = 1\nelseif VERSION >= v"1.10"\n    ${syncAt}\nend`, why);
  rejects(`if VERSION >= v"1.12"\n    ${syncAt}\nend`, why); // loaded by older Julia all the same
  rejects(`function f(rt)\n    if VERSION >= v"1.12"\n        @ccall gc_safe=true libtenferro.tf_runtime_sync(rt::Ptr{tf_runtime})::Int32\n    end\nend`, why);
});

test('@ccall: forms the checker cannot verify are refused', () => {
  rejects('f() = @ccall libtenferro.tf_version()', 'no return type');
  rejects('f() = @ccall tf_version()::UInt32', 'write it as @ccall');
  rejects('f() = @ccall libother.tf_version()::UInt32', 'the library must be libtenferro, not libother');
  rejects('f(s) = @ccall libtenferro.tf_status_string(s)::Cstring', 'argument s has no type');
  rejects(guarded('f(rt) = @ccall gc_safe=true cancel_handler=h libtenferro.tf_runtime_sync(rt::Ptr{tf_runtime})::Int32'),
    '@ccall option cancel_handler=h');
  rejects('f(s) = @ccall libtenferro.tf_status_string(s::Int32; 1::Int32)::Cstring', 'no \';\' in a @ccall');
  rejects('f(rt, fn, d) = @ccall libtenferro.tf_with_context(rt::Ptr{tf_runtime}, fn::Ptr{Cvoid}, d::Ptr{Cvoid})::Int32',
    'tf_with_context takes a callback: bind it with ccall');
});

test('@ccall: every blocking function needs a gc_safe one', () => {
  const plain = 'f(rt) = ccall((:tf_runtime_sync, libtenferro), Int32, (Ptr{tf_runtime},), rt)\n';
  rejectsWith(problemsOf(plain, { gcSafe: ['tf_runtime_sync'] }),
    'tf_runtime_sync blocks the calling thread', '@ccall gc_safe=true libtenferro.tf_runtime_sync');
  // gc_safe=false does not count.
  rejectsWith(problemsOf(guarded(syncAt.replace('gc_safe=true', 'gc_safe=false')), { gcSafe: ['tf_runtime_sync'] }),
    'tf_runtime_sync blocks');
  assert.deepStrictEqual(problemsOf(plain + guarded(syncAt), { gcSafe: ['tf_runtime_sync'] }), []);
  assert.deepStrictEqual(BLOCKING.filter((n) => !header.prototypes[n]), []);
});

// ---- exports CUDA.jl has too ------------------------------------------------------

test('exports: none that CUDA.jl exports', () => {
  const cuda = readNameList(CUDA_JL_EXPORTS);
  for (const name of ['synchronize', 'stream', 'device', 'launch', 'default_stream', 'CuStream', 'context']) {
    assert.ok(cuda.has(name), `${name} is missing from ${CUDA_JL_EXPORTS}`);
  }
  assert.ok(!cuda.has('Stream') && !cuda.has('sync_stream') && !cuda.has('launch_kernel'));
  const lib = 'sync_stream(x) = 1\nsynchronize(x) = 1\nlaunch(x) = 1\n';
  const options = { exportClashes: cuda };
  assert.deepStrictEqual(problemsOf(`${lib}export sync_stream`, options), []);
  rejectsWith(problemsOf(`${lib}export sync_stream, synchronize`, options),
    'exports synchronize, which CUDA.jl exports too', 'using CUDA, TenferroGPU');
  rejectsWith(problemsOf(`${lib}module Inner\nexport launch\nend`, options), 'exports launch');
  // Without the list, nothing to compare with.
  assert.deepStrictEqual(problemsOf(`${lib}export synchronize`), []);
});

// ---- rethrows ---------------------------------------------------------------------

test('rethrows: throw(e) of the caught exception loses its backtrace', () => {
  for (const ok of [
    'try\n    f()\ncatch e\n    e isa ErrorException || rethrow()\nend',
    'try\n    f()\ncatch e\n    throw(ArgumentError("wrapped: $e"))\nend',
    'try\n    f()\ncatch\n    rethrow()\nend',
    'e = ErrorException("x")\ntry\n    f()\ncatch\n    e\n    throw(e)\nend', // `catch` alone binds nothing: e is the outer one
    'try\n    f()\ncatch err\n    throw(other)\nend',
  ]) assert.deepStrictEqual(problemsOf(ok), [], ok);
  rejects('try\n    f()\ncatch e\n    throw(e)\nend', 'throw(e) rethrows the caught exception', 'use rethrow()');
  rejects('try f() catch err; cleanup(); throw(err) end', 'throw(err)');
  rejects('try\n    f()\ncatch e\n    if e isa ArgumentError\n        g()\n    else\n        throw(e)\n    end\nend', 'throw(e)');
  rejects('function h()\n    try\n        f()\n    catch e\n        @async throw(e)\n    end\nend', 'throw(e)');
  // Tests and examples are held to it too.
  const r = checkJuliaSources([{ file: 'm.jl', text: 'export g\ng() = 1' }], header,
    { others: [{ file: 'runtests.jl', text: 'try\n    g()\ncatch e\n    throw(e)\nend' }] });
  rejectsWith(r.problems, 'runtests.jl:4:5: throw(e)');
});

// ---- names of the module used elsewhere ---------------------------------------------

test('names: TenferroGPU.name must exist, unexported names need qualifying', () => {
  const module = 'module TenferroGPU\nexport open_thing\nopen_thing() = 1\nhidden() = 2\nconst LIMIT = 3\nend\n';
  const check = (other) => checkJuliaSources([{ file: 'm.jl', text: module }], header,
    { others: [{ file: 'use.jl', text: other }] }).problems;
  assert.deepStrictEqual(check('using TenferroGPU\nopen_thing()\nTenferroGPU.hidden()\nx = TenferroGPU.LIMIT'), []);
  rejectsWith(check('TenferroGPU.hiden()'), 'use.jl:1:1: TenferroGPU.hiden: TenferroGPU defines no hiden');
  rejectsWith(check('using TenferroGPU\nhidden()'), 'use.jl:2:1: hidden is not exported by TenferroGPU', 'TenferroGPU.hidden');
  rejectsWith(check('using TenferroGPU\nopen_thing() do x\n    hidden(x)\nend'), 'use.jl:3:5: hidden');
  // A file's own function of the same name is its own.
  assert.deepStrictEqual(check('hidden() = 5\nhidden()'), []);
});

// ---- package extensions ---------------------------------------------------------------

function project(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jl-project-'));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  return checkProject(path.join(dir, 'Project.toml'), parseJulia);
}

const toml = (ext = 'PkgCUDAExt = "CUDA"', weak = 'CUDA = "052768ef-5323-5732-b1bb-66c8b64840ba"',
  compat = 'CUDA = "5.4, 6"') =>
  `name = "Pkg"\n\n[weakdeps]\n${weak}\n\n[extensions]\n${ext}\n\n[compat]\n${compat}\njulia = "1.9"\n`;

test('extensions: declared in Project.toml, a file that defines the module', () => {
  const ok = project({ 'Project.toml': toml(), 'ext/PkgCUDAExt.jl': 'module PkgCUDAExt\nend\n' });
  assert.deepStrictEqual(ok.problems, []);
  assert.strictEqual(ok.extensions.length, 1);
  const folder = project({ 'Project.toml': toml(), 'ext/PkgCUDAExt/PkgCUDAExt.jl': 'module PkgCUDAExt\nend\n' });
  assert.deepStrictEqual(folder.problems, []);
  rejectsWith(project({ 'Project.toml': toml(), 'ext/PkgCUDAExt.jl': 'module Other\nend\n' }).problems,
    'must define module PkgCUDAExt', 'not Other');
  rejectsWith(project({ 'Project.toml': toml() }).problems, 'neither ext/PkgCUDAExt.jl nor ext/PkgCUDAExt/PkgCUDAExt.jl');
  rejectsWith(project({ 'Project.toml': toml(undefined, 'CUDA = "not-a-uuid"'), 'ext/PkgCUDAExt.jl': 'module PkgCUDAExt\nend\n' }).problems,
    'CUDA is not in [weakdeps] with a UUID');
  rejectsWith(project({ 'Project.toml': toml(undefined, undefined, 'Other = "1"'), 'ext/PkgCUDAExt.jl': 'module PkgCUDAExt\nend\n' }).problems,
    '[compat] bounds no version of CUDA');
  rejectsWith(project({ 'Project.toml': toml('PkgCUDAExt = ["CUDA", "Adapt"]'), 'ext/PkgCUDAExt.jl': 'module PkgCUDAExt\nend\n' }).problems
    .filter((p) => p.includes('Adapt') && p.includes('weakdeps')), 'Adapt is not in [weakdeps]');
});

test('extensions: the binding\'s own Project.toml', () => {
  const file = path.join(root, 'bindings', 'julia', 'Project.toml');
  const t = readToml(fs.readFileSync(file, 'utf8'));
  assert.strictEqual(t.extensions.TenferroGPUCUDAExt, 'CUDA');
  assert.strictEqual(t.weakdeps.CUDA, '052768ef-5323-5732-b1bb-66c8b64840ba'); // CUDA.jl's UUID
  const r = checkProject(file, parseJulia);
  assert.deepStrictEqual(r.problems, []);
  assert.deepStrictEqual(r.extensions.map((p) => path.basename(p)), ['TenferroGPUCUDAExt.jl']);
});
