// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Rules about the Julia sources that are not about C types, for what Julia
// itself would only find when the code runs (and no Julia runs where the
// binding is checked):
//
//  - exports that clash with CUDA.jl's (`using CUDA, TenferroGPU` would
//    make both names unusable unqualified);
//  - `throw(e)` of the exception a `catch e` block caught, which replaces
//    its backtrace with the rethrow's (rethrow() keeps it);
//  - `TenferroGPU.name` in the extension, tests and examples naming
//    something the module does not define.

const fs = require('fs');
const path = require('path');

function where(file, node) {
  return `${file}:${node.startPosition.row + 1}:${node.startPosition.column + 1}`;
}

function walk(node, visit) {
  visit(node);
  for (const c of node.namedChildren) walk(c, visit);
}

// The names of a list file: one a line, '#' starts a comment.
function readNameList(file) {
  return new Set(fs.readFileSync(file, 'utf8').split('\n')
    .map((l) => l.replace(/#.*/, '').trim()).filter(Boolean));
}

const CUDA_JL_EXPORTS = path.join(__dirname, 'cuda-jl-exports.txt');

// Every exported name that `clashing` (a Set) holds is a problem.
function checkExportClashes(parsed, clashing, what = 'CUDA.jl') {
  const problems = [];
  for (const { file, root } of parsed) {
    walk(root, (n) => {
      if (n.type !== 'export_statement') return;
      for (const id of n.namedChildren) {
        if (clashing.has(id.text)) {
          problems.push(`${where(file, id)}: exports ${id.text}, which ${what} exports too: ` +
                        `after \`using CUDA, TenferroGPU\` neither could be used unqualified; rename it or stop exporting it`);
        }
      }
    });
  }
  return problems;
}

// The variable a catch clause binds: an identifier on the `catch` line
// (`catch e`); on the next line it is the first statement instead.
function catchVariable(clause) {
  const first = clause.namedChildren[0];
  if (first?.type !== 'identifier' || first.startPosition.row !== clause.startPosition.row) return null;
  return first;
}

// `throw(e)` inside `catch e ... end`, where e is the caught exception.
function checkRethrows(file, root) {
  const problems = [];
  walk(root, (n) => {
    if (n.type !== 'catch_clause') return;
    const v = catchVariable(n);
    if (!v) return;
    walk(n, (c) => {
      if (c.type !== 'call_expression' || c.namedChildren[0]?.text !== 'throw') return;
      const args = c.namedChildren[1]?.namedChildren || [];
      if (args.length === 1 && args[0].type === 'identifier' && args[0].text === v.text) {
        problems.push(`${where(file, c)}: throw(${v.text}) rethrows the caught exception with this line's backtrace: ` +
                      'use rethrow(), which keeps where it was thrown');
      }
    });
  });
  return problems;
}

// `TenferroGPU.name` where the module defines no `name` (defined: the
// names the module's sources define).
function checkModuleReferences(files, defined, moduleName = 'TenferroGPU') {
  const problems = [];
  for (const { file, root } of files) {
    walk(root, (n) => {
      if (n.type !== 'field_expression') return;
      const [obj, field] = n.namedChildren;
      if (obj?.type === 'identifier' && obj.text === moduleName && field?.type === 'identifier' &&
          field.text !== 'LibTenferro' && !defined.has(field.text)) {
        problems.push(`${where(file, n)}: ${n.text}: ${moduleName} defines no ${field.text}`);
      }
    });
  }
  return problems;
}

// Calls, in files that `using TenferroGPU` (tests, examples), of names the
// module defines but does not export: they would be undefined there
// (defined: the module's names; exported: its exports; local: each file's
// own definitions, which win).
function checkUnexportedUses(files, defined, exported, localNames) {
  const problems = [];
  for (const { file, root } of files) {
    const mine = localNames(root);
    walk(root, (n) => {
      if (n.type !== 'call_expression') return;
      const callee = n.namedChildren[0];
      if (callee?.type !== 'identifier') return;
      const name = callee.text;
      if (defined.has(name) && !exported.has(name) && !mine.has(name)) {
        problems.push(`${where(file, callee)}: ${name} is not exported by TenferroGPU: write TenferroGPU.${name}, ` +
                      'or use the exported name that replaced it');
      }
    });
  }
  return problems;
}

// The names export statements list.
function exportedNames(parsed) {
  const names = new Set();
  for (const { root } of parsed) {
    walk(root, (n) => {
      if (n.type === 'export_statement') for (const id of n.namedChildren) names.add(id.text);
    });
  }
  return names;
}

module.exports = {
  checkUnexportedUses, exportedNames, CUDA_JL_EXPORTS, readNameList, checkExportClashes, checkRethrows, catchVariable, checkModuleReferences,
};
