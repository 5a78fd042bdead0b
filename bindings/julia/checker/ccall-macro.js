// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// The `@ccall` form, for the library's blocking functions:
//
//     @ccall gc_safe=true libtenferro.tf_runtime_sync(rt::Ptr{tf_runtime})::Int32
//
// read into the parts a ccall has (name, library, return type, argument
// types and values) so that lib.js checks it against the header like a
// ccall.  `gc_safe=true` (the garbage collector may run while the call
// blocks) exists from Julia 1.12; on older versions the macro refuses the
// option when the code is loaded, even in a branch that never runs, so
// every gc_safe @ccall must sit in the first branch of an
// `@static if VERSION >= v"1.12"` (or a later version).

// The version that introduced @ccall's gc_safe option.
const GC_SAFE_SINCE = [1, 12];

// The functions that block the calling thread until the device is done
// (the header's @threadsafety says so): Julia's garbage collector must be
// able to run while a task waits in them, so each needs a gc_safe @ccall.
const BLOCKING = ['tf_runtime_sync', 'tf_event_synchronize', 'tf_download', 'tf_download_scalar',
  'tf_host_unregister', 'tf_memory_trim'];

function where(file, node) {
  return `${file}:${node.startPosition.row + 1}:${node.startPosition.column + 1}`;
}

function isAtCcall(node) {
  return node?.type === 'macrocall_expression' && node.namedChildren[0]?.type === 'macro_identifier' &&
    node.namedChildren[0].text === '@ccall';
}

// {name, libNode, retNode, types: [node], values: [node], gcSafe, problems}
// for a `@ccall [opt=value ...] lib.name(a::T, ...)::R` node.
function readAtCcall(file, node, lib) {
  const at = where(file, node);
  const args = node.namedChildren.find((c) => c.type === 'macro_argument_list')?.namedChildren || [];
  const out = { name: '?', types: [], values: [], gcSafe: false, retNode: null, problems: [] };
  const options = args.slice(0, -1);
  const call = args[args.length - 1];
  for (const o of options) {
    const [key, , value] = o.type === 'assignment' ? o.namedChildren : [];
    if (key?.text === 'gc_safe' && (value?.text === 'true' || value?.text === 'false')) {
      out.gcSafe = value.text === 'true';
    } else {
      out.problems.push(`${at}: @ccall option ${o.text}: only gc_safe=true or gc_safe=false is checked`);
    }
  }
  const shape = `write it as @ccall [gc_safe=true] ${lib}.tf_name(arg::T, ...)::R`;
  if (call?.type !== 'typed_expression') {
    out.problems.push(`${at}: the @ccall has no return type: ${shape}`);
    return out;
  }
  const [callee, retNode] = call.namedChildren;
  out.retNode = retNode;
  const fn = callee?.type === 'call_expression' ? callee.namedChildren[0] : null;
  const list = callee?.type === 'call_expression' ? callee.namedChildren[1] : null;
  if (fn?.type !== 'field_expression' || list?.type !== 'argument_list') {
    out.problems.push(`${at}: ${shape}; got ${callee ? callee.text : '?'}`);
    return out;
  }
  const [libNode, nameNode] = fn.namedChildren;
  out.name = nameNode.text;
  if (libNode.text !== lib) out.problems.push(`${at}: ${out.name}: the library must be ${lib}, not ${libNode.text}`);
  if (list.text.includes(';')) {
    out.problems.push(`${at}: ${out.name}: the header has no variadic function; no ';' in a @ccall`);
    out.retNode = null; // no signature to compare
  }
  for (const a of list.namedChildren) {
    if (a.type !== 'typed_expression') {
      out.problems.push(`${at}: ${out.name}: argument ${a.text} has no type: write value::T`);
      out.retNode = null; // the types are incomplete: nothing to compare
      continue;
    }
    out.values.push(a.namedChildren[0]);
    out.types.push(a.namedChildren[1]);
  }
  return out;
}

// [major, minor] of a v"1.12" literal, or null.
function versionLiteral(node) {
  if (node?.type !== 'prefixed_string_literal' || node.namedChildren[0]?.text !== 'v') return null;
  const m = node.text.match(/^v"(\d+)\.(\d+)/);
  return m ? [Number(m[1]), Number(m[2])] : null;
}

function atLeast(v, want) {
  return v[0] > want[0] || (v[0] === want[0] && v[1] >= want[1]);
}

// Whether an `if` condition is `VERSION >= v"X.Y..."` (or `>`) with X.Y at
// least `want`.
function versionAtLeast(cond, want) {
  if (cond?.type !== 'binary_expression') return false;
  const [lhs, op, rhs] = cond.namedChildren;
  if (lhs?.text !== 'VERSION' || !['>=', '>'].includes(op?.text)) return false;
  const v = versionLiteral(rhs);
  return v !== null && atLeast(v, want);
}

function same(a, b) {
  return a.type === b.type && a.startIndex === b.startIndex && a.endIndex === b.endIndex;
}

// Whether `node` sits in the first branch of an `@static if` whose
// condition guarantees Julia `want` or later.
function underStaticVersion(node, want = GC_SAFE_SINCE) {
  for (let child = node, n = node.parent; n; child = n, n = n.parent) {
    if (n.type !== 'if_statement') continue;
    const [cond] = n.namedChildren;
    const inElse = child.type === 'else_clause' || child.type === 'elseif_clause';
    const isStatic = n.parent?.type === 'macro_argument_list' && n.parent.parent?.namedChildren[0]?.text === '@static';
    if (!inElse && !same(child, cond) && isStatic && versionAtLeast(cond, want)) return true;
  }
  return false;
}

// Problems of a gc_safe @ccall placed where older Julia would load it.
function checkGcSafePlacement(file, node) {
  if (underStaticVersion(node)) return [];
  return [`${where(file, node)}: @ccall gc_safe=true needs Julia ${GC_SAFE_SINCE.join('.')}: ` +
          `put it in the first branch of @static if VERSION >= v"${GC_SAFE_SINCE.join('.')}"`];
}

module.exports = { isAtCcall, readAtCcall, checkGcSafePlacement, underStaticVersion, GC_SAFE_SINCE, BLOCKING };
