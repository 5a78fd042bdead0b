// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Project.toml's package extensions, which Julia checks only when the
// trigger package is loaded: each [extensions] entry names triggers listed
// in [weakdeps] (with a UUID) and bounded in [compat], and a file
// ext/<Name>.jl (or ext/<Name>/<Name>.jl) that defines `module <Name>`.

const fs = require('fs');
const path = require('path');

// The tables of a TOML file as {table: {key: value}}; values are strings
// or arrays of strings, which is all Project.toml's tables here hold.
function readToml(text) {
  const tables = { '': {} };
  let current = tables[''];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim();
    if (!line) continue;
    const table = line.match(/^\[([\w.-]+)\]$/);
    if (table) {
      current = tables[table[1]] = tables[table[1]] || {};
      continue;
    }
    const kv = line.match(/^("?[\w.-]+"?)\s*=\s*(.+)$/);
    if (!kv) throw new Error(`cannot read the TOML line '${raw}'`);
    const key = kv[1].replace(/"/g, '');
    const value = kv[2].trim();
    current[key] = value.startsWith('[')
      ? [...value.matchAll(/"([^"]*)"/g)].map((m) => m[1])
      : value.replace(/^"(.*)"$/, '$1');
  }
  return tables;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// Problems of the extensions declared in the Project.toml at `file`;
// parseJulia parses an extension's source.  Returns {problems, extensions:
// [paths of the extension files]}.
function checkProject(file, parseJulia) {
  const dir = path.dirname(file);
  const t = readToml(fs.readFileSync(file, 'utf8'));
  const problems = [];
  const extensions = [];
  for (const [name, value] of Object.entries(t.extensions || {})) {
    const triggers = Array.isArray(value) ? value : [value];
    for (const dep of triggers) {
      if (!UUID.test(t.weakdeps?.[dep] || '')) problems.push(`${file}: extension ${name}: ${dep} is not in [weakdeps] with a UUID`);
      if (!t.compat?.[dep]) problems.push(`${file}: extension ${name}: [compat] bounds no version of ${dep}`);
    }
    const src = [path.join(dir, 'ext', `${name}.jl`), path.join(dir, 'ext', name, `${name}.jl`)].find((p) => fs.existsSync(p));
    if (!src) {
      problems.push(`${file}: extension ${name}: neither ext/${name}.jl nor ext/${name}/${name}.jl exists`);
      continue;
    }
    extensions.push(src);
    const root = parseJulia(fs.readFileSync(src, 'utf8')).rootNode;
    const mod = root.namedChildren.find((n) => n.type === 'module_definition');
    const modName = mod?.namedChildren.find((n) => n.type === 'identifier')?.text;
    if (modName !== name) problems.push(`${src}: must define module ${name} (Julia loads it by that name), not ${modName || 'none'}`);
  }
  return { problems, extensions };
}

module.exports = { readToml, checkProject };
