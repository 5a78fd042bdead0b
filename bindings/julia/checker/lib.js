// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Verifies the Julia module's ccalls against the C headers.
//
// The Julia side is parsed with a real Julia grammar (tree-sitter-julia);
// the headers, which are regular (one prototype per declaration), are read
// with a small C declaration reader.  It checks:
//
//  - every ccall((:name, libtenferro), R, (A1, A2, ...), args...): `name`
//    is declared with TF_API, and R and each Ai match the C return and
//    parameter types (see allowedTypes);
//  - every ccall(fn, R, (A...), args...) through a function pointer: it
//    sits in a function named after a function of a vendor header
//    (cublas_api.h: `cublasSgemm_v2(fn, ...) = ccall(fn, ...)`), whose
//    prototype it must match the same way;
//  - function-pointer arguments: wherever a ccall wrapper is called with a
//    callback for a C function-pointer parameter, the value must be C_NULL
//    or a @cfunction (written there, or bound to a local name) whose return
//    and argument types match the C callback type, naming a Julia function
//    of the checked sources whose parameter count and annotated types agree;
//    with requireCallbacks, every such parameter must be given one;
//  - every `@ccall [gc_safe=true] libtenferro.tf_name(a::T, ...)::R` the
//    same way as a ccall, a gc_safe one only where Julia 1.12 or later
//    loads it (ccall-macro.js); with options.gcSafe, each function listed
//    (the blocking ones) must have a gc_safe @ccall;
//  - Julia structs named like a header struct: same fields, in order, with
//    matching types; constants named like a header enum value or numeric
//    #define: the header's value;
//  - names: exports defined and not among options.exportClashes (CUDA.jl's
//    exports), L.name and TenferroGPU.name defined, names the tests and
//    examples call unqualified exported, no `throw(e)` of a caught
//    exception (rules.js).

const Parser = require('tree-sitter');
const Julia = require('tree-sitter-julia');
const { isAtCcall, readAtCcall, checkGcSafePlacement } = require('./ccall-macro');
const {
  checkExportClashes, checkRethrows, checkModuleReferences, checkUnexportedUses, exportedNames,
} = require('./rules');

// ---- C declarations ----------------------------------------------------------

// C scalar types and the Julia types that match them.  C enums are int.
const SCALARS = {
  int8_t: ['Int8'], uint8_t: ['UInt8'], int16_t: ['Int16'], uint16_t: ['UInt16'],
  int32_t: ['Int32', 'Cint'], uint32_t: ['UInt32', 'Cuint'],
  int64_t: ['Int64', 'Clonglong'], uint64_t: ['UInt64', 'Culonglong'],
  int: ['Int32', 'Cint'], unsigned: ['UInt32', 'Cuint'],
  size_t: ['Csize_t'], char: ['UInt8', 'Cchar'], float: ['Float32', 'Cfloat'],
  double: ['Float64', 'Cdouble'], void: ['Cvoid'],
};

function stripC(text) {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/\/\/[^\n]*/g, ' ')
    .replace(/^[ \t]*#(?:[^\n]*\\\n)*[^\n]*/gm, ' ');
}

// Numeric #define values: plain numbers, and casts of shifted numbers as
// the header writes its sizes ("((uint32_t)8 << 20)").
function readDefines(text) {
  const defines = {};
  const value = /^\(*(?:\(\s*u?int\d+_t\s*\))?\s*(\d+)\s*(?:<<\s*(\d+))?\s*\)*$/;
  for (const m of text.matchAll(/^[ \t]*#define[ \t]+(\w+)[ \t]+([^\n]+?)[ \t]*$/gm)) {
    const v = m[2].match(value);
    if (v) defines[m[1]] = Number(v[1]) * 2 ** Number(v[2] || 0);
  }
  return defines;
}

function splitParams(params) {
  const out = [];
  let depth = 0;
  let cur = '';
  for (const ch of params) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  if (cur.trim()) out.push(cur);
  return out;
}

function parseParams(text, typedefs, defines) {
  let params = splitParams(text);
  if (params.length === 1 && params[0].trim() === 'void') params = [];
  return params.map((p) => parseCDecl(p, typedefs, defines));
}

// One C declaration ("const tf_runtime_options *options", "int32_t (*fn)(void *)")
// as {base, isConst, pointers, fnptr, sig, name, array}; a function pointer
// carries its signature: sig = {ret, params}.
function parseCDecl(decl, typedefs, defines) {
  decl = decl.trim().replace(/\s+/g, ' ');
  const fp = decl.match(/^(.*?)\(\s*\*\s*(\w*)\s*\)\s*\((.*)\)$/);
  if (fp) {
    const sig = { ret: parseCDecl(fp[1], typedefs, defines), params: parseParams(fp[3], typedefs, defines) };
    return { fnptr: true, sig, name: fp[2], pointers: 0 };
  }
  let array = null;
  const arr = decl.match(/\[\s*(\w+)\s*\]$/);
  if (arr) {
    array = /^\d+$/.test(arr[1]) ? Number(arr[1]) : defines[arr[1]];
    if (array === undefined) throw new Error(`unknown array size ${arr[1]} in '${decl}'`);
    decl = decl.slice(0, arr.index).trim();
  }
  const pointers = (decl.match(/\*/g) || []).length;
  const words = decl.replace(/\*/g, ' ').split(' ').filter(Boolean);
  const isConst = words[0] === 'const';
  let rest = words.filter((w) => w !== 'const' && w !== 'struct' && w !== 'enum');
  if (rest[0] === 'unsigned' && rest[1] === 'int') rest = ['unsigned', ...rest.slice(2)];
  const base = rest[0];
  const name = rest.length > 1 ? rest[rest.length - 1] : '';
  let type = { base, isConst, pointers, fnptr: false, name, array };
  // Resolve typedef aliases (tf_status -> int32_t, cublasHandle_t ->
  // struct cublasContext *, tf_log_fn -> its function pointer).
  const alias = typedefs[base];
  if (alias && alias.kind === 'alias') {
    type = { ...type, base: alias.base, pointers: pointers + (alias.pointers || 0) };
  }
  if (alias && alias.kind === 'fnptr' && pointers === 0) type = { ...type, fnptr: true, sig: alias.sig };
  return type;
}

// Typedefs of a header body (comments and preprocessor lines stripped).
function readTypedefs(body, defines) {
  const typedefs = {};
  const structs = {};
  for (const m of body.matchAll(/typedef\s+struct\s+(\w+)\s*\{([^}]*)\}\s*(\w+)\s*;/g)) {
    typedefs[m[3]] = { kind: 'struct' };
    structs[m[3]] = m[2].split(';').map((f) => f.trim()).filter(Boolean);
  }
  for (const m of body.matchAll(/typedef\s+struct\s+(\w+)\s+(\w+)\s*;/g)) {
    typedefs[m[2]] = { kind: 'opaque' };
  }
  for (const m of body.matchAll(/typedef\s+struct\s+(\w+)\s*\*\s*(\w+)\s*;/g)) {
    typedefs[m[1]] = typedefs[m[1]] || { kind: 'opaque' };
    typedefs[m[2]] = { kind: 'alias', base: m[1], pointers: 1 };
  }
  for (const m of body.matchAll(/typedef\s+enum\s*\w*\s*\{[^}]*\}\s*(\w+)\s*;/g)) {
    typedefs[m[1]] = { kind: 'alias', base: 'int' };
  }
  for (const m of body.matchAll(/typedef\s+(\w+)\s+(\w+)\s*;/g)) {
    if (m[1] !== 'struct' && m[1] !== 'enum') typedefs[m[2]] = { kind: 'alias', base: m[1] };
  }
  for (const m of body.matchAll(/typedef\s+([^;{}()]*)\(\s*\*\s*(\w+)\s*\)\s*\(([^;]*)\)\s*;/g)) {
    typedefs[m[2]] = { kind: 'fnptr' };
    typedefs[m[2]].sig = {
      ret: parseCDecl(m[1], typedefs, defines),
      params: parseParams(m[3], typedefs, defines),
    };
  }
  return { typedefs, structs };
}

// Reads typedefs, structs and TF_API prototypes of the header text.
function parseHeader(text) {
  const defines = readDefines(text);
  const body = stripC(text);
  const { typedefs, structs } = readTypedefs(body, defines);
  const prototypes = {};
  for (const m of body.matchAll(/\bTF_API\b([^;{}]*);/g)) {
    const d = m[1].trim().replace(/\s+/g, ' ');
    const p = parsePrototype(d, typedefs, defines);
    if (!p) throw new Error(`cannot read 'TF_API ${d}'`);
    prototypes[p.name] = p;
  }
  // Enum constants and numeric #defines, by name.
  const constants = { ...defines };
  for (const m of body.matchAll(/enum\s+\w*\s*\{([^}]*)\}/g)) {
    for (const e of m[1].matchAll(/(\w+)\s*=\s*(-?\d+)/g)) constants[e[1]] = Number(e[2]);
  }
  const structFields = {};
  for (const [name, fields] of Object.entries(structs)) {
    structFields[name] = fields.map((f) => parseCDecl(f, typedefs, defines));
  }
  return { prototypes, typedefs, structFields, constants };
}

// "RET NAME(PARAMS)" as {name, ret, params}, or null.
function parsePrototype(d, typedefs, defines) {
  const open = d.indexOf('(');
  const head = d.slice(0, open).trim();
  const nameMatch = head.match(/(\w+)$/);
  if (open < 0 || !nameMatch || !d.endsWith(')')) return null;
  return {
    name: nameMatch[1],
    ret: parseCDecl(head.slice(0, nameMatch.index), typedefs, defines),
    params: parseParams(d.slice(open + 1, -1), typedefs, defines),
  };
}

// A vendor library's header (cublas_api.h): its typedefs, and its
// prototypes looked up by name.  Calling-convention macros are dropped.
function parseVendorHeader(text, macros = ['CUBLASAPI', 'CUBLASWINAPI', 'CUDARTAPI', 'NVRTC_API']) {
  const defines = readDefines(text);
  let body = stripC(text);
  for (const m of macros) body = body.replace(new RegExp(`\\b${m}\\b`, 'g'), ' ');
  const { typedefs } = readTypedefs(body, defines);
  const cache = {};
  return {
    typedefs,
    find(name) {
      if (!(name in cache)) {
        const m = body.match(new RegExp(`([\\w\\s*]+?)\\b${name}\\s*\\(([^;{}]*?)\\)\\s*;`));
        cache[name] = m ? parsePrototype(`${m[1].trim()} ${name}(${m[2]})`, typedefs, defines) : null;
      }
      return cache[name];
    },
  };
}

// The Julia spellings of a C type, as canonical strings ("Ref{Ptr{tf_runtime}}").
// position: 'return', 'arg' (may be Ref{...}), 'cfarg' (a @cfunction
// argument: never Ref), 'pointee' (inside Ptr/Ref) or 'field'.
function allowedTypes(t, typedefs, position) {
  if (t.fnptr) return ['Ptr{Cvoid}'];
  if (t.array) return allowedTypes({ ...t, array: null }, typedefs, 'field').map((e) => `NTuple{${t.array},${e}}`);
  if (t.pointers === 0) {
    if (SCALARS[t.base]) return t.base === 'void' && position !== 'return' && position !== 'pointee' ? [] : SCALARS[t.base];
    if (typedefs[t.base]) return [t.base];
    throw new Error(`no Julia type known for C type '${t.base}'`);
  }
  const inner = { ...t, pointers: t.pointers - 1 };
  const out = [];
  if (t.pointers === 1 && t.base === 'char') {
    if (t.isConst) out.push('Cstring');
    out.push('Ptr{UInt8}', 'Ptr{Cchar}');
    return out;
  }
  const pointees = allowedTypes(inner, typedefs, 'pointee');
  // void* and pointers to opaque structs may also be untyped.
  const opaque = inner.pointers === 0 && (inner.base === 'void' || typedefs[inner.base]?.kind === 'opaque');
  const targets = opaque && !pointees.includes('Cvoid') ? [...pointees, 'Cvoid'] : pointees;
  for (const p of targets) {
    out.push(`Ptr{${p}}`);
    if (position === 'arg' && p !== 'Cvoid') out.push(`Ref{${p}}`);
  }
  return out;
}

function describeC(t) {
  if (t.fnptr) return 'a function pointer';
  return `${t.isConst ? 'const ' : ''}${t.base}${t.array ? `[${t.array}]` : ''}${'*'.repeat(t.pointers)}`;
}

// ---- the Julia sources -------------------------------------------------------

// Canonical text of a Julia type expression, or null if it is not a plain
// type (Name, Name{T, ...}, Module.Name, NTuple{N,T}).
function juliaType(node) {
  if (!node) return null;
  switch (node.type) {
    case 'identifier':
    case 'integer_literal':
      return node.text;
    case 'field_expression':
      return juliaType(node.namedChildren[node.namedChildren.length - 1]);
    case 'parametrized_type_expression': {
      const [head, curly] = node.namedChildren;
      const args = curly.namedChildren.map(juliaType);
      if (args.includes(null)) return null;
      return `${juliaType(head)}{${args.join(',')}}`;
    }
    default:
      return null;
  }
}

function where(file, node) {
  return `${file}:${node.startPosition.row + 1}:${node.startPosition.column + 1}`;
}

function walk(node, visit) {
  visit(node);
  for (const c of node.namedChildren) walk(c, visit);
}

// Where the parse failed: ERROR nodes and tokens the parser had to invent
// (MISSING, which are anonymous nodes), so all children are visited.
function syntaxErrors(file, root) {
  const found = [];
  const visit = (n) => {
    const missing = typeof n.isMissing === 'function' ? n.isMissing() : n.isMissing;
    if (n.type === 'ERROR' || missing) {
      found.push(`${where(file, n)}: Julia syntax error ${missing ? `(missing '${n.type}')` : `near '${n.text.slice(0, 40)}'`}`);
      return;
    }
    for (const c of n.children) visit(c);
  };
  visit(root);
  return found.length ? found : [`${file}: Julia syntax error`];
}

// node-tree-sitter reads a string through a buffer of 32 Ki UTF-16 units
// by default and refuses longer text ("Invalid argument"): size it to fit.
function parseJulia(text) {
  const parser = new Parser();
  parser.setLanguage(Julia);
  return parser.parse(text, null, { bufferSize: text.length + 1 });
}

// A function definition (`function f(a::T)::R ... end`, `f(a) = ...`, with
// or without `where`) as
// {name, params: [{name, type}], ret, node}, or null for any other node.
function functionDef(node) {
  let sig = null;
  if (node.type === 'function_definition') {
    sig = node.namedChildren.find((c) => c.type === 'signature')?.namedChildren[0];
  } else if (node.type === 'assignment') {
    sig = node.namedChildren[0];
    if (!sig || !['call_expression', 'typed_expression', 'where_expression'].includes(sig.type)) return null;
  } else {
    return null;
  }
  if (sig && sig.type === 'where_expression') sig = sig.namedChildren[0];
  let ret = null;
  if (sig && sig.type === 'typed_expression') {
    ret = juliaType(sig.namedChildren[1]);
    sig = sig.namedChildren[0];
  }
  if (!sig || sig.type !== 'call_expression' || sig.namedChildren[0]?.type !== 'identifier') return null;
  const list = sig.namedChildren[1];
  if (!list || list.type !== 'argument_list') return null;
  const params = list.namedChildren.map((p) => (p.type === 'typed_expression'
    ? { name: p.namedChildren[0].text, type: juliaType(p.namedChildren[1]) }
    : { name: p.text, type: null }));
  return { name: sig.namedChildren[0].text, params, ret, node };
}

// The function definition a node is inside, or null at top level.
function enclosingFunction(node) {
  for (let n = node.parent; n; n = n.parent) {
    const f = functionDef(n);
    if (f) return f;
  }
  return null;
}

// Scopes from a node outwards: enclosing function definitions and do
// blocks, then the file.
function scopesOf(node) {
  const scopes = [];
  for (let n = node.parent; n; n = n.parent) {
    if (functionDef(n) || n.type === 'do_clause' || n.type === 'source_file') scopes.push(n);
  }
  return scopes;
}

function isCfunction(node) {
  return node?.type === 'macrocall_expression' &&
    node.namedChildren.some((c) => c.type === 'macro_identifier' && c.text === '@cfunction');
}

// Checks a return type node and argument type nodes against a prototype
// `proto`; returns problems.  `form` names the call in messages.
function checkSignature(at, name, proto, retNode, types, typedefs, form) {
  const problems = [];
  const ret = juliaType(retNode);
  const retOk = allowedTypes(proto.ret, typedefs, 'return');
  if (!retOk.includes(ret)) {
    problems.push(`${at}: ${name} returns ${describeC(proto.ret)}: the ${form} says ${retNode.text}, expected one of ${retOk.join(', ')}`);
  }
  if (types.length !== proto.params.length) {
    problems.push(`${at}: ${name} takes ${proto.params.length} arguments: the ${form} lists ${types.length} types`);
    return problems;
  }
  types.forEach((tn, i) => {
    const ok = allowedTypes(proto.params[i], typedefs, 'arg');
    if (!ok.includes(juliaType(tn))) {
      problems.push(`${at}: ${name} argument ${i + 1} (${proto.params[i].name || '?'}) is ${describeC(proto.params[i])}: ` +
                    `the ${form} says ${tn.text}, expected one of ${ok.join(', ')}`);
    }
  });
  return problems;
}

// Checks the types of a ccall against a prototype `proto`; returns problems.
function checkCcallTypes(at, name, proto, retNode, typesNode, callArgs, typedefs) {
  if (typesNode.type !== 'tuple_expression') {
    return [`${at}: ${name}: the argument types must be a tuple literal such as (T,), got ${typesNode.text}`];
  }
  const types = typesNode.namedChildren;
  const problems = checkSignature(at, name, proto, retNode, types, typedefs, 'ccall');
  if (callArgs.length !== types.length) {
    problems.push(`${at}: ${name}: ${types.length} argument types but ${callArgs.length} arguments`);
  }
  return problems;
}

// Checks one `@ccall [gc_safe=true] lib.tf_name(a::T, ...)::R` node;
// returns {name, gcSafe, problems}.  Functions that take a callback are
// bound with ccall, whose callback arguments the checker follows.
function checkAtCcall(file, node, header, lib) {
  const at = where(file, node);
  const c = readAtCcall(file, node, lib);
  const problems = [...c.problems];
  if (c.gcSafe) problems.push(...checkGcSafePlacement(file, node));
  if (!c.retNode || c.name === '?') return { name: c.name, gcSafe: c.gcSafe, problems };
  const proto = header.prototypes[c.name];
  if (!proto) return { name: c.name, gcSafe: c.gcSafe, problems: [...problems, `${at}: ${c.name} is not a function of the header`] };
  if (proto.params.some((p) => p.fnptr)) {
    problems.push(`${at}: ${c.name} takes a callback: bind it with ccall((:${c.name}, ${lib}), ...), whose callback arguments are checked`);
  }
  problems.push(...checkSignature(at, c.name, proto, c.retNode, c.types, header.typedefs, '@ccall'));
  return { name: c.name, gcSafe: c.gcSafe, problems };
}

// Checks one ccall node; returns {name, problems}.  A ccall through a
// function pointer is checked against the vendor prototype named by its
// enclosing function.
function checkCcall(file, node, header, lib, vendor) {
  const at = where(file, node);
  const args = node.namedChildren[1].namedChildren;
  if (args.length < 3) return { name: '?', problems: [`${at}: ccall needs (:name, ${lib}), a return type and an argument type tuple`] };
  const [spec, retNode, typesNode] = args;
  const callArgs = args.slice(3);
  if (spec.type === 'identifier') {
    const fn = enclosingFunction(node);
    const name = fn ? fn.name : '?';
    if (!vendor) return { name, problems: [`${at}: ccall through the pointer '${spec.text}' in ${name}: no vendor header was given to check it against`] };
    const proto = fn && vendor.find(fn.name);
    if (!proto) {
      return { name, problems: [`${at}: ccall through the pointer '${spec.text}' must sit in a function named after the vendor function it calls; ${name} is not declared in the vendor header`] };
    }
    if (fn.params[0]?.name !== spec.text) {
      return { name, problems: [`${at}: ${name}: the function pointer '${spec.text}' must be the wrapper's first parameter`] };
    }
    return { name, problems: checkCcallTypes(at, name, proto, retNode, typesNode, callArgs, vendor.typedefs) };
  }
  if (spec.type !== 'tuple_expression' || spec.namedChildren.length !== 2 ||
      spec.namedChildren[0].type !== 'quote_expression') {
    return { name: '?', problems: [`${at}: write the function as (:tf_name, ${lib}); got ${spec.text}`] };
  }
  const name = spec.namedChildren[0].text.replace(/^:/, '');
  const problems = [];
  if (spec.namedChildren[1].text !== lib) problems.push(`${at}: ${name}: the library must be ${lib}, not ${spec.namedChildren[1].text}`);
  const proto = header.prototypes[name];
  if (!proto) return { name, problems: [...problems, `${at}: ${name} is not a function of the header`] };
  return { name, problems: [...problems, ...checkCcallTypes(at, name, proto, retNode, typesNode, callArgs, header.typedefs)] };
}

// Checks a Julia struct named like a header struct, field by field.
function checkStruct(file, node, header) {
  const name = juliaType(node.namedChildren[0].namedChildren[0]);
  const cFields = header.structFields[name];
  if (!cFields) return { name: null, problems: [] };
  const at = where(file, node);
  const fields = node.namedChildren.slice(1).filter((n) => n.type === 'typed_expression');
  const problems = [];
  if (fields.length !== cFields.length) {
    problems.push(`${at}: struct ${name} has ${fields.length} fields, the header's ${cFields.length}`);
  }
  fields.slice(0, cFields.length).forEach((f, i) => {
    const [fname, ftype] = f.namedChildren;
    const c = cFields[i];
    const ok = allowedTypes(c, header.typedefs, 'field');
    if (fname.text !== c.name || !ok.includes(juliaType(ftype))) {
      problems.push(`${at}: struct ${name} field ${i + 1} is ${fname.text}::${ftype.text}, ` +
                    `the header's is ${describeC(c)} ${c.name} (Julia: ${ok.join(' or ')})`);
    }
  });
  return { name, problems };
}

// `const NAME = value` or `const NAME = T(value)` where NAME is an enum
// constant or numeric #define of the header: the value must be the header's.
function checkConstant(file, node, header) {
  const assign = node.namedChildren[0];
  if (!assign || assign.type !== 'assignment') return [];
  const [lhs, , rhs] = assign.namedChildren;
  if (!lhs || lhs.type !== 'identifier' || !(lhs.text in header.constants)) return [];
  let value = rhs;
  if (value && value.type === 'call_expression' && value.namedChildren[1]?.namedChildren.length === 1) {
    value = value.namedChildren[1].namedChildren[0];
  }
  const want = header.constants[lhs.text];
  if (!value || value.type !== 'integer_literal' || Number(value.text) !== want) {
    return [`${where(file, node)}: ${lhs.text} is ${want} in the header, not ${rhs ? rhs.text : '?'}`];
  }
  return [];
}

// ---- callbacks: @cfunction values for C function-pointer parameters --------

// A ccall wrapper: the C function it calls and, for each of its parameters
// passed straight through, the C parameter it becomes.
function wrapperOf(ccallNode, name, header) {
  const fn = enclosingFunction(ccallNode);
  const proto = header.prototypes[name];
  if (!fn || !proto) return null;
  const callArgs = ccallNode.namedChildren[1].namedChildren.slice(3);
  const toC = new Map();
  fn.params.forEach((p, i) => {
    const j = callArgs.findIndex((a) => a.type === 'identifier' && a.text === p.name);
    if (j >= 0) toC.set(i, j);
  });
  return { name: fn.name, cname: name, proto, toC };
}

// The @cfunction a callback argument is: written in place, or the value of
// a local `name = @cfunction(...)` in an enclosing scope.  null otherwise.
function cfunctionOf(arg) {
  if (isCfunction(arg)) return arg;
  if (arg.type !== 'identifier') return null;
  for (const scope of scopesOf(arg)) {
    let found = null;
    walk(scope, (n) => {
      if (!found && n.type === 'assignment' && n.namedChildren[0]?.type === 'identifier' &&
          n.namedChildren[0].text === arg.text && isCfunction(n.namedChildren[2])) found = n.namedChildren[2];
    });
    if (found) return found;
  }
  return null;
}

// Checks a @cfunction against the C callback type `sig` and the Julia
// function it names (defs: every function definition, by name).
function checkCfunction(file, cf, sig, what, defs, typedefs) {
  const at = where(file, cf);
  const args = cf.namedChildren.find((c) => c.type === 'argument_list')?.namedChildren || [];
  if (args.length !== 3 || args[2].type !== 'tuple_expression') {
    return [`${at}: ${what}: write the callback as @cfunction(f, R, (A, ...))`];
  }
  const [fnNode, retNode, typesNode] = args;
  const problems = [];
  const ret = juliaType(retNode);
  const retOk = allowedTypes(sig.ret, typedefs, 'return');
  if (!retOk.includes(ret)) {
    problems.push(`${at}: ${what} returns ${describeC(sig.ret)}: the @cfunction says ${retNode.text}, expected one of ${retOk.join(', ')}`);
  }
  const types = typesNode.namedChildren.map(juliaType);
  if (types.length !== sig.params.length) {
    problems.push(`${at}: ${what} takes ${sig.params.length} arguments: the @cfunction lists ${types.length}`);
  } else {
    types.forEach((jt, i) => {
      const ok = allowedTypes(sig.params[i], typedefs, 'cfarg');
      if (!ok.includes(jt)) {
        problems.push(`${at}: ${what} argument ${i + 1} (${sig.params[i].name || '?'}) is ${describeC(sig.params[i])}: ` +
                      `the @cfunction says ${typesNode.namedChildren[i].text}, expected one of ${ok.join(', ')}`);
      }
    });
  }
  const candidates = defs.get(fnNode.text) || [];
  if (!candidates.length) {
    problems.push(`${at}: ${what}: the @cfunction names ${fnNode.text}, which the checked sources do not define`);
    return problems;
  }
  // The method @cfunction will pick: same arity, annotated types equal.
  const fits = candidates.filter((d) => d.params.length === types.length &&
    d.params.every((p, i) => p.type === null || p.type === types[i]) && (d.ret === null || d.ret === ret));
  if (!fits.length) {
    const d = candidates[0];
    problems.push(`${at}: ${what}: ${fnNode.text}(${d.params.map((p) => `${p.name}${p.type ? `::${p.type}` : ''}`).join(', ')})` +
                  `${d.ret ? `::${d.ret}` : ''} (${where(d.file, d.node)}) does not take (${types.join(', ')}) returning ${ret}`);
  }
  return problems;
}

// ---- names: exports and references into LibTenferro --------------------------

// The name a struct, abstract type or module definition introduces.
function typeName(node) {
  let head = node.namedChildren[0];
  if (head?.type === 'type_head') head = head.namedChildren[0];
  if (head?.type === 'binary_expression') head = head.namedChildren[0];
  if (head?.type === 'parametrized_type_expression') head = head.namedChildren[0];
  return head?.type === 'identifier' ? head.text : null;
}

// Names defined anywhere under `root`: functions, structs, abstract types,
// constants, modules.
function definedNames(root) {
  const names = new Set();
  walk(root, (n) => {
    const f = functionDef(n);
    if (f) names.add(f.name);
    if (['struct_definition', 'abstract_definition', 'module_definition'].includes(n.type)) {
      const t = typeName(n);
      if (t) names.add(t);
    }
    if (n.type === 'const_statement' && n.namedChildren[0]?.type === 'assignment' &&
        n.namedChildren[0].namedChildren[0]?.type === 'identifier') {
      names.add(n.namedChildren[0].namedChildren[0].text);
    }
  });
  return names;
}

// Every exported name is defined in the checked sources; every `L.name`
// (and `LibTenferro.name`) names something LibTenferro defines, in the
// checked sources and in `others` (tests, examples), which cannot be run
// here to find such typos.
function checkNames(checked, others) {
  const problems = [];
  const defined = new Set();
  let libNames = null;
  for (const { root } of checked) {
    for (const n of definedNames(root)) defined.add(n);
    walk(root, (n) => {
      if (n.type === 'module_definition' && typeName(n) === 'LibTenferro') libNames = definedNames(n);
    });
  }
  for (const { file, root } of checked) {
    walk(root, (n) => {
      if (n.type !== 'export_statement') return;
      for (const id of n.namedChildren) {
        if (!defined.has(id.text)) problems.push(`${where(file, id)}: exports ${id.text}, which is not defined`);
      }
    });
  }
  if (!libNames) return problems;
  for (const { file, root } of [...checked, ...others]) {
    walk(root, (n) => {
      const [obj, field] = n.type === 'field_expression' ? n.namedChildren : [];
      if (obj?.type === 'identifier' && (obj.text === 'L' || obj.text === 'LibTenferro') &&
          field?.type === 'identifier' && !libNames.has(field.text)) {
        problems.push(`${where(file, n)}: ${n.text}: LibTenferro defines no ${field.text}`);
      }
    });
  }
  return problems;
}

// ---- whole sources -------------------------------------------------------------

// Checks Julia sources together (callbacks cross files): files is a list
// of {file, text}; options.others ({file, text} too) are only searched for
// references into LibTenferro.  Returns {problems, ccalls: [names],
// structs: [names], callbacks: [verified "tf_name:param" strings]}.
function checkJuliaSources(files, header, options = {}) {
  const lib = options.lib || 'libtenferro';
  const vendor = options.vendor || null;
  const problems = [];
  const ccalls = [];
  const structs = [];
  const parsed = files.map(({ file, text }) => ({ file, root: parseJulia(text).rootNode }));
  const wrappers = new Map();
  const defs = new Map();
  const gcSafe = new Set();
  for (const { file, root } of parsed) {
    if (root.hasError) problems.push(...syntaxErrors(file, root));
    walk(root, (n) => {
      const def = functionDef(n);
      if (def) {
        if (!defs.has(def.name)) defs.set(def.name, []);
        defs.get(def.name).push({ ...def, file });
      }
      if (n.type === 'call_expression' && n.namedChildren[0]?.text === 'ccall' &&
          n.namedChildren[1]?.type === 'argument_list') {
        const r = checkCcall(file, n, header, lib, vendor);
        problems.push(...r.problems);
        ccalls.push(r.name);
        const w = wrapperOf(n, r.name, header);
        if (w && w.proto.params.some((p) => p.fnptr)) wrappers.set(w.name, w);
      } else if (isAtCcall(n)) {
        const r = checkAtCcall(file, n, header, lib);
        problems.push(...r.problems);
        ccalls.push(r.name);
        if (r.gcSafe) gcSafe.add(r.name);
      } else if (n.type === 'const_statement') {
        problems.push(...checkConstant(file, n, header));
      } else if (n.type === 'struct_definition') {
        const s = checkStruct(file, n, header);
        problems.push(...s.problems);
        if (s.name) structs.push(s.name);
      }
    });
  }
  // Calls of the wrappers: each callback argument must be a @cfunction
  // the checker can see, of the C callback's type.
  const callbacks = new Set();
  for (const { file, root } of parsed) {
    walk(root, (n) => {
      if (n.type !== 'call_expression') return;
      const callee = n.namedChildren[0];
      const calleeName = callee?.type === 'field_expression'
        ? callee.namedChildren[callee.namedChildren.length - 1]?.text : callee?.text;
      const w = wrappers.get(calleeName);
      const list = n.namedChildren[1];
      if (!w || list?.type !== 'argument_list' || enclosingFunction(n)?.name === w.name) return;
      for (const [i, j] of w.toC) {
        const param = w.proto.params[j];
        const arg = list.namedChildren[i];
        if (!param.fnptr || !arg || arg.text === 'C_NULL') continue;
        const what = `${w.cname}'s ${param.name || `argument ${j + 1}`}`;
        const cf = cfunctionOf(arg);
        if (!cf) {
          problems.push(`${where(file, arg)}: ${what}: pass C_NULL or a @cfunction (or a local name bound to one), not ${arg.text}`);
          continue;
        }
        const p = checkCfunction(file, cf, param.sig, what, defs, header.typedefs);
        problems.push(...p);
        if (!p.length) callbacks.add(`${w.cname}:${param.name}`);
      }
    });
  }
  const others = (options.others || []).map(({ file, text }) => ({ file, root: parseJulia(text).rootNode }));
  problems.push(...checkNames(parsed, others));
  problems.push(...checkSourceRules(parsed, others, options));
  for (const name of options.gcSafe || []) {
    if (!gcSafe.has(name)) {
      problems.push(`${name} blocks the calling thread: bind it with @ccall gc_safe=true ${lib}.${name}(...)::R too, ` +
                    'so that the garbage collector can run while it waits');
    }
  }
  if (options.requireCallbacks) {
    for (const w of wrappers.values()) {
      w.proto.params.filter((p) => p.fnptr).forEach((p) => {
        if (!callbacks.has(`${w.cname}:${p.name}`)) {
          problems.push(`${w.cname}'s ${p.name}: no call of ${w.name} passes a @cfunction the checker verified`);
        }
      });
    }
  }
  return { problems, ccalls, structs, callbacks: [...callbacks], gcSafe: [...gcSafe] };
}

// The rules of rules.js: rethrows everywhere; export clashes over the
// module; names of the module used by the extension, tests and examples
// (options.extensions: more checked files, e.g. package extensions, which
// reference the module as TenferroGPU.name).
function checkSourceRules(parsed, others, options) {
  const problems = [];
  for (const { file, root } of [...parsed, ...others]) problems.push(...checkRethrows(file, root));
  if (options.exportClashes) problems.push(...checkExportClashes(parsed, options.exportClashes));
  const defined = new Set();
  for (const { root } of parsed) for (const n of definedNames(root)) defined.add(n);
  problems.push(...checkModuleReferences([...parsed, ...others], defined));
  problems.push(...checkUnexportedUses(others, defined, exportedNames(parsed), definedNames));
  return problems;
}

// One source text on its own (the checker's tests).
function checkJuliaSource(text, header, file = '<source>', lib = 'libtenferro', vendor = null) {
  return checkJuliaSources([{ file, text }], header, { lib, vendor });
}

module.exports = {
  parseHeader, parseVendorHeader, checkJuliaSource, checkJuliaSources, allowedTypes, parseJulia,
  syntaxErrors,
};
