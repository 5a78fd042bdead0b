#!/usr/bin/env node
'use strict';
// node check-ccalls.js HEADER JULIA_FILE_OR_DIR... [--syntax JULIA_FILE_OR_DIR...]
// Exit 0 when every ccall, header-named struct and header constant of the
// files before --syntax matches the header, and the files after it (tests,
// whose ccalls reach the driver double by pointer) parse.
const fs = require('fs');
const path = require('path');
const { parseHeader, checkJuliaSource, parseJulia, syntaxErrors } = require('./lib');

function juliaFiles(p) {
  if (fs.statSync(p).isDirectory()) {
    return fs.readdirSync(p).sort().flatMap((f) => juliaFiles(path.join(p, f)));
  }
  return p.endsWith('.jl') ? [p] : [];
}

function main(argv) {
  if (argv.length < 2) {
    console.error('usage: check-ccalls.js HEADER JULIA_FILE_OR_DIR...');
    return 2;
  }
  const header = parseHeader(fs.readFileSync(argv[0], 'utf8'));
  const split = argv.indexOf('--syntax');
  const checked = split < 0 ? argv.slice(1) : argv.slice(1, split);
  const syntaxOnly = split < 0 ? [] : argv.slice(split + 1);
  const problems = [];
  for (const file of syntaxOnly.flatMap(juliaFiles)) {
    const root = parseJulia(fs.readFileSync(file, 'utf8')).rootNode;
    if (root.hasError) problems.push(...syntaxErrors(file, root));
  }
  const called = new Set();
  let ccalls = 0;
  let structs = 0;
  for (const file of checked.flatMap(juliaFiles)) {
    const r = checkJuliaSource(fs.readFileSync(file, 'utf8'), header, file);
    problems.push(...r.problems);
    ccalls += r.ccalls.length;
    structs += r.structs.length;
    r.ccalls.forEach((c) => called.add(c.replace(/^\(:(\w+).*$/s, '$1')));
  }
  for (const p of problems) console.log(`check-ccalls: ${p}`);
  const missing = Object.keys(header.prototypes).filter((n) => !called.has(n));
  console.log(`check-ccalls: ${ccalls} ccalls and ${structs} structs checked against ` +
              `${Object.keys(header.prototypes).length} prototypes; ${problems.length} problems` +
              (missing.length ? `; no ccall for: ${missing.join(', ')}` : ''));
  return problems.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
