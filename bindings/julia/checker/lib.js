'use strict';
// Verifies the Julia module's ccalls against the C header.
//
// The Julia side is parsed with a real Julia grammar (tree-sitter-julia);
// the header, which is regular (one prototype per declaration, each starting
// with TF_API), is read with a small C declaration reader.  For every
// ccall((:name, libtenferro), R, (A1, A2, ...), args...) it checks that
// `name` is declared, and that R and each Ai are Julia types that match the
// C return and parameter types (see allowedTypes).  Julia structs named like
// a header struct must have the same fields, in order, with matching types.

const Parser = require('tree-sitter');
const Julia = require('tree-sitter-julia');

// ---- the C header ------------------------------------------------------------

// C scalar types and the Julia types that match them.
const SCALARS = {
  int8_t: ['Int8'], uint8_t: ['UInt8'], int16_t: ['Int16'], uint16_t: ['UInt16'],
  int32_t: ['Int32', 'Cint'], uint32_t: ['UInt32', 'Cuint'],
  int64_t: ['Int64', 'Clonglong'], uint64_t: ['UInt64', 'Culonglong'],
  size_t: ['Csize_t'], char: ['UInt8', 'Cchar'], float: ['Float32', 'Cfloat'],
  double: ['Float64', 'Cdouble'], void: ['Cvoid'],
};

function stripC(text) {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/\/\/[^\n]*/g, ' ')
    .replace(/^[ \t]*#(?:[^\n]*\\\n)*[^\n]*/gm, ' ');
}

// Numeric #define values (array capacities).
function readDefines(text) {
  const defines = {};
  for (const m of text.matchAll(/^[ \t]*#define[ \t]+(\w+)[ \t]+\(?(\d+)\)?[ \t]*$/gm)) {
    defines[m[1]] = Number(m[2]);
  }
  return defines;
}

// One C declaration ("const tf_runtime_options *options", "int32_t (*fn)(void *)")
// as {base, isConst, pointers, fnptr, name, array}.
function parseCDecl(decl, typedefs, defines) {
  decl = decl.trim().replace(/\s+/g, ' ');
  if (/\(\s*\*/.test(decl)) {
    const m = decl.match(/\(\s*\*\s*(\w*)\s*\)/);
    return { fnptr: true, name: m ? m[1] : '', pointers: 0 };
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
  const rest = words.filter((w) => w !== 'const' && w !== 'struct');
  let base = rest[0];
  const name = rest.length > 1 ? rest[rest.length - 1] : '';
  let type = { base, isConst, pointers, fnptr: false, name, array };
  // Resolve typedef aliases (tf_status -> int32_t, tf_log_fn -> fn pointer).
  const alias = typedefs[base];
  if (alias && alias.kind === 'alias') type = { ...type, base: alias.base };
  if (alias && alias.kind === 'fnptr') type = { ...type, fnptr: pointers === 0 };
  return type;
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

// Reads typedefs, structs and TF_API prototypes of the header text.
function parseHeader(text) {
  const defines = readDefines(text);
  const body = stripC(text);
  const typedefs = {};
  const structs = {};
  for (const m of body.matchAll(/typedef\s+struct\s+(\w+)\s*\{([^}]*)\}\s*(\w+)\s*;/g)) {
    typedefs[m[3]] = { kind: 'struct' };
    structs[m[3]] = m[2].split(';').map((f) => f.trim()).filter(Boolean);
  }
  for (const m of body.matchAll(/typedef\s+struct\s+(\w+)\s+(\w+)\s*;/g)) {
    typedefs[m[2]] = { kind: 'opaque' };
  }
  for (const m of body.matchAll(/typedef\s+[^;{}()]*\(\s*\*\s*(\w+)\s*\)\s*\([^;]*\)\s*;/g)) {
    typedefs[m[1]] = { kind: 'fnptr' };
  }
  for (const m of body.matchAll(/typedef\s+(\w+)\s+(\w+)\s*;/g)) {
    if (m[1] !== 'struct') typedefs[m[2]] = { kind: 'alias', base: m[1] };
  }
  const prototypes = {};
  for (const m of body.matchAll(/\bTF_API\b([^;{}]*);/g)) {
    const d = m[1].trim().replace(/\s+/g, ' ');
    const open = d.indexOf('(');
    const head = d.slice(0, open).trim();
    const nameMatch = head.match(/(\w+)$/);
    if (open < 0 || !nameMatch || !d.endsWith(')')) throw new Error(`cannot read 'TF_API ${d}'`);
    const name = nameMatch[1];
    const ret = parseCDecl(head.slice(0, nameMatch.index), typedefs, defines);
    let params = splitParams(d.slice(open + 1, -1));
    if (params.length === 1 && params[0].trim() === 'void') params = [];
    prototypes[name] = { name, ret, params: params.map((p) => parseCDecl(p, typedefs, defines)) };
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

// The Julia spellings of a C type, as canonical strings ("Ref{Ptr{tf_runtime}}").
// position: 'return', 'arg' (may be Ref{...}), 'pointee' (inside Ptr/Ref) or 'field'.
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

// ---- the Julia module --------------------------------------------------------

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

function parseJulia(text) {
  const parser = new Parser();
  parser.setLanguage(Julia);
  return parser.parse(text);
}

// Checks one ccall node; returns a list of problems.
function checkCcall(file, node, header, lib) {
  const problems = [];
  const at = where(file, node);
  const args = node.namedChildren[1].namedChildren;
  if (args.length < 3) return [`${at}: ccall needs (:name, ${lib}), a return type and an argument type tuple`];
  const [spec, retNode, typesNode] = args;
  const callArgs = args.slice(3);
  if (spec.type !== 'tuple_expression' || spec.namedChildren.length !== 2 ||
      spec.namedChildren[0].type !== 'quote_expression') {
    return [`${at}: write the function as (:tf_name, ${lib}); got ${spec.text}`];
  }
  const name = spec.namedChildren[0].text.replace(/^:/, '');
  if (spec.namedChildren[1].text !== lib) problems.push(`${at}: ${name}: the library must be ${lib}, not ${spec.namedChildren[1].text}`);
  const proto = header.prototypes[name];
  if (!proto) return [...problems, `${at}: ${name} is not a function of the header`];
  if (typesNode.type !== 'tuple_expression') {
    return [...problems, `${at}: ${name}: the argument types must be a tuple literal such as (T,), got ${typesNode.text}`];
  }
  const ret = juliaType(retNode);
  const retOk = allowedTypes(proto.ret, header.typedefs, 'return');
  if (!retOk.includes(ret)) {
    problems.push(`${at}: ${name} returns ${describeC(proto.ret)}: the ccall says ${retNode.text}, expected one of ${retOk.join(', ')}`);
  }
  const types = typesNode.namedChildren;
  if (types.length !== proto.params.length) {
    problems.push(`${at}: ${name} takes ${proto.params.length} arguments: the ccall lists ${types.length} types`);
  } else {
    types.forEach((tn, i) => {
      const ok = allowedTypes(proto.params[i], header.typedefs, 'arg');
      const jt = juliaType(tn);
      if (!ok.includes(jt)) {
        problems.push(`${at}: ${name} argument ${i + 1} (${proto.params[i].name || '?'}) is ${describeC(proto.params[i])}: ` +
                      `the ccall says ${tn.text}, expected one of ${ok.join(', ')}`);
      }
    });
  }
  if (callArgs.length !== types.length) {
    problems.push(`${at}: ${name}: ${types.length} argument types but ${callArgs.length} arguments`);
  }
  return problems;
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

// Checks one Julia source text; returns {problems, ccalls: [names], structs: [names]}.
function checkJuliaSource(text, header, file = '<source>', lib = 'libtenferro') {
  const tree = parseJulia(text);
  const problems = [];
  const ccalls = [];
  const structs = [];
  if (tree.rootNode.hasError) problems.push(...syntaxErrors(file, tree.rootNode));
  walk(tree.rootNode, (n) => {
    if (n.type === 'call_expression' && n.namedChildren[0]?.text === 'ccall' &&
        n.namedChildren[1]?.type === 'argument_list') {
      const p = checkCcall(file, n, header, lib);
      problems.push(...p);
      const spec = n.namedChildren[1].namedChildren[0];
      ccalls.push(spec ? spec.text : '?');
    } else if (n.type === 'macrocall_expression' && /^@ccall\b/.test(n.text)) {
      problems.push(`${where(file, n)}: use ccall((:tf_name, ${lib}), R, (A,), ...), which this checker verifies, not @ccall`);
    } else if (n.type === 'const_statement') {
      problems.push(...checkConstant(file, n, header));
    } else if (n.type === 'struct_definition') {
      const s = checkStruct(file, n, header);
      problems.push(...s.problems);
      if (s.name) structs.push(s.name);
    }
  });
  return { problems, ccalls, structs };
}

module.exports = { parseHeader, checkJuliaSource, allowedTypes, parseJulia, syntaxErrors };
