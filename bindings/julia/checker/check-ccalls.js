#!/usr/bin/env node
'use strict';
// node check-ccalls.js HEADER JULIA_FILE_OR_DIR... [--vendor C_HEADER]...
//                      [--syntax JULIA_FILE_OR_DIR...]
// Exit 0 when every ccall, callback, header-named struct and header
// constant of the files before --syntax matches the header (ccalls through
// cuBLAS function pointers: the --vendor headers), every function-pointer
// parameter is given a verified @cfunction, every export is defined, every
// L.name exists in LibTenferro, and the files after --syntax (tests and
// examples, whose ccalls reach the driver double by pointer) parse and
// name only what LibTenferro defines.
const fs = require('fs');
const path = require('path');
const { parseHeader, parseVendorHeader, checkJuliaSources, parseJulia, syntaxErrors } = require('./lib');

function juliaFiles(p) {
  if (fs.statSync(p).isDirectory()) {
    return fs.readdirSync(p).sort().flatMap((f) => juliaFiles(path.join(p, f)));
  }
  return p.endsWith('.jl') ? [p] : [];
}

// Splits argv into the header, checked paths, vendor headers and
// syntax-only paths.
function parseArgs(argv) {
  const out = { header: argv[0], checked: [], vendor: [], syntax: [] };
  let list = out.checked;
  for (let i = 1; i < argv.length; i++) {
    if (argv[i] === '--syntax') list = out.syntax;
    else if (argv[i] === '--vendor') out.vendor.push(argv[++i]);
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
    console.error('usage: check-ccalls.js HEADER JULIA_FILE_OR_DIR... [--vendor C_HEADER] [--syntax JULIA_FILE_OR_DIR...]');
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
  const files = args.checked.flatMap(juliaFiles).map((file) => ({ file, text: fs.readFileSync(file, 'utf8') }));
  const r = checkJuliaSources(files, header, { vendor: vendorOf(args.vendor), requireCallbacks: true, others });
  problems.push(...r.problems);
  const called = new Set(r.ccalls);
  for (const p of problems) console.log(`check-ccalls: ${p}`);
  const missing = Object.keys(header.prototypes).filter((n) => !called.has(n));
  console.log(`check-ccalls: ${r.ccalls.length} ccalls, ${r.callbacks.length} callback parameters and ` +
              `${r.structs.length} structs checked against ${Object.keys(header.prototypes).length} prototypes` +
              `${args.vendor.length ? ` and ${args.vendor.join(', ')}` : ''}; ${problems.length} problems` +
              (missing.length ? `; no ccall for: ${missing.join(', ')}` : ''));
  return problems.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
