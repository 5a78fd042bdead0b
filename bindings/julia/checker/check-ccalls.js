#!/usr/bin/env node
// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// node check-ccalls.js HEADER JULIA_FILE_OR_DIR... [--vendor C_HEADER]...
//                      [--project PROJECT_TOML] [--syntax JULIA_FILE_OR_DIR...]
// Exit 0 when every ccall and @ccall, callback, header-named struct and
// header constant of the files before --syntax matches the header (ccalls
// through cuBLAS function pointers: the --vendor headers), every
// function-pointer parameter is given a verified @cfunction, every
// blocking function (BLOCKING) has a gc_safe @ccall that only Julia 1.12
// or later loads, every export is defined and none is one of CUDA.jl's,
// every L.name and TenferroGPU.name exists, no catch block rethrows with
// throw(e), the package extensions of --project are declared right (their
// sources are checked with the module), and the files after --syntax
// (tests and examples, whose ccalls reach the driver double by pointer)
// parse, keep backtraces and name only what the module defines.
const fs = require('fs');
const path = require('path');
const { parseHeader, parseVendorHeader, checkJuliaSources, parseJulia, syntaxErrors } = require('./lib');
const { CUDA_JL_EXPORTS, readNameList } = require('./rules');
const { checkProject } = require('./project');
const { BLOCKING } = require('./ccall-macro');

function juliaFiles(p) {
  if (fs.statSync(p).isDirectory()) {
    return fs.readdirSync(p).sort().flatMap((f) => juliaFiles(path.join(p, f)));
  }
  return p.endsWith('.jl') ? [p] : [];
}

// Splits argv into the header, checked paths, vendor headers and
// syntax-only paths.
function parseArgs(argv) {
  const out = { header: argv[0], checked: [], vendor: [], syntax: [], project: null };
  let list = out.checked;
  for (let i = 1; i < argv.length; i++) {
    if (argv[i] === '--syntax') list = out.syntax;
    else if (argv[i] === '--vendor') out.vendor.push(argv[++i]);
    else if (argv[i] === '--project') out.project = argv[++i];
    else list.push(argv[i]);
  }
  return out;
}

// The vendor headers as one: prototypes looked up in each in turn.
function vendorOf(paths) {
  if (!paths.length) return null;
  const headers = paths.map((p) => parseVendorHeader(fs.readFileSync(p, 'utf8')));
  return {
    typedefs: Object.assign({}, ...headers.map((h) => h.typedefs)),
    find: (name) => headers.map((h) => h.find(name)).find(Boolean) || null,
  };
}

function main(argv) {
  if (argv.length < 2) {
    console.error('usage: check-ccalls.js HEADER JULIA_FILE_OR_DIR... [--vendor C_HEADER] [--project PROJECT_TOML] ' +
                  '[--syntax JULIA_FILE_OR_DIR...]');
    return 2;
  }
  const args = parseArgs(argv);
  const header = parseHeader(fs.readFileSync(args.header, 'utf8'));
  const problems = [];
  const others = args.syntax.flatMap(juliaFiles).map((file) => ({ file, text: fs.readFileSync(file, 'utf8') }));
  for (const { file, text } of others) {
    const root = parseJulia(text).rootNode;
    if (root.hasError) problems.push(...syntaxErrors(file, root));
  }
  const project = args.project ? checkProject(args.project, parseJulia) : { problems: [], extensions: [] };
  problems.push(...project.problems);
  const files = [...args.checked.flatMap(juliaFiles), ...project.extensions]
    .map((file) => ({ file, text: fs.readFileSync(file, 'utf8') }));
  const r = checkJuliaSources(files, header, {
    vendor: vendorOf(args.vendor), requireCallbacks: true, others,
    gcSafe: BLOCKING, exportClashes: readNameList(CUDA_JL_EXPORTS),
  });
  problems.push(...r.problems);
  const called = new Set(r.ccalls);
  for (const p of problems) console.log(`check-ccalls: ${p}`);
  const missing = Object.keys(header.prototypes).filter((n) => !called.has(n));
  console.log(`check-ccalls: ${files.length} module files (${project.extensions.length} extensions) and ` +
              `${others.length} other files; ${r.ccalls.length} ccalls (${r.gcSafe.length} gc_safe), ` +
              `${r.callbacks.length} callback parameters and ` +
              `${r.structs.length} structs checked against ${Object.keys(header.prototypes).length} prototypes` +
              `${args.vendor.length ? ` and ${args.vendor.join(', ')}` : ''}; ${problems.length} problems` +
              (missing.length ? `; no ccall for: ${missing.join(', ')}` : ''));
  return problems.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
