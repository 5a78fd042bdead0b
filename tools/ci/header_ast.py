# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the public header declares, read from clang's JSON AST.

Shared by tools/ci/abi-layout (frozen struct layouts and enum values) and
tools/ci/check-header-docs (the documentation contract).  Only declarations
spelled in the public header itself count; what <stdint.h> brings in does not.
"""
import json
import os
import re
import subprocess
import sys

# Custom Doxygen sections (docs/Doxyfile ALIASES); clang must know them to
# parse them as block commands.
DOC_COMMANDS = ("threadsafety", "failure")


def fail(tool, message):
    sys.stderr.write("%s: %s\n" % (tool, message))
    sys.exit(1)


def dump(header, clang="clang", lang="c"):
    """The translation unit `#include "<header>"` as clang's JSON AST."""
    header = os.path.abspath(header)
    source = '#include "%s"\n' % header
    cmd = [clang, "-x", lang, "-std=c11" if lang == "c" else "-std=c++17", "-fsyntax-only",
           "-fparse-all-comments", "-fcomment-block-commands=" + ",".join(DOC_COMMANDS),
           "-Xclang", "-ast-dump=json", "-"]
    out = subprocess.run(cmd, input=source.encode(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, check=False)
    if out.returncode != 0:
        fail("header_ast", "clang could not parse %s:\n%s" % (header, out.stderr.decode()))
    return header, json.loads(out.stdout)


def public_decls(header, ast):
    """Top-level declarations whose location is the header (clang reports a
    file name only when it changes, so it is tracked in order)."""
    current = None
    for decl in ast.get("inner", []):
        loc = decl.get("loc", {})
        for where in (loc, loc.get("expansionLoc", {}), loc.get("spellingLoc", {})):
            if "file" in where:
                current = where["file"]
                break
        if current and os.path.abspath(current) == header:
            yield decl


def records(decls):
    """(type name, [field paths]) of every complete struct or union the header
    names tf_*, as a tag ("struct tf_x") or through a typedef of an untagged
    struct ("tf_x").  Members of an anonymous struct or union appear by name,
    as C11 lets offsetof reach them."""
    decls = list(decls)
    untagged = {}
    found = []
    for decl in decls:
        if decl.get("kind") != "RecordDecl" or not decl.get("completeDefinition"):
            continue
        name = decl.get("name", "")
        if not name:
            untagged[decl.get("id")] = decl
        elif name.startswith("tf_"):
            found.append(("%s %s" % (decl.get("tagUsed", "struct"), name), fields(decl, "")))
    for decl in decls:
        if decl.get("kind") != "TypedefDecl" or not decl["name"].startswith("tf_"):
            continue
        for inner in decl.get("inner", []):
            owned = inner.get("ownedTagDecl", {}).get("id")
            if owned in untagged:
                found.append((decl["name"], fields(untagged[owned], "")))
    return found


def fields(record, prefix):
    paths = []
    for member in record.get("inner", []):
        kind = member.get("kind")
        if kind == "RecordDecl" and not member.get("name"):
            # An anonymous struct or union: its members are members of ours.
            paths.extend(fields(member, prefix))
        elif kind == "FieldDecl" and member.get("name"):
            paths.append(prefix + member["name"])
    return paths


def enums(decls):
    """(enum name, [constant names]) of every enum in the header."""
    found = []
    for decl in decls:
        if decl.get("kind") != "EnumDecl":
            continue
        constants = [c["name"] for c in decl.get("inner", []) if c.get("kind") == "EnumConstantDecl"]
        found.append((decl.get("name", "(anonymous)"), constants))
    return found


def typedefs(decls):
    """Names of the header's typedefs of types other than its own structs."""
    found = []
    for decl in decls:
        if decl.get("kind") != "TypedefDecl":
            continue
        qual = decl.get("type", {}).get("qualType", "")
        if qual.startswith("struct ") or qual.startswith("union "):
            continue
        found.append(decl["name"])
    return found


def functions(decls):
    return [d for d in decls if d.get("kind") == "FunctionDecl"]


# The header's preamble defines "the device statuses", which a function's
# @return may name instead of listing them.
DEVICE_STATUSES = re.compile(r'"The device statuses" are (.*?)any call that works on the device',
                             re.S)


def device_statuses(header):
    """The statuses the header's preamble calls "the device statuses"."""
    with open(header, encoding="utf-8") as f:
        m = DEVICE_STATUSES.search(f.read())
    found = re.findall(r"\bTF_ERROR_[A-Z_]+\b", m.group(1)) if m else []
    if not found:
        fail("header_ast", "%s does not define \"the device statuses\"" % header)
    return found


def expand_statuses(return_text, device):
    """@return text with the statuses "the device statuses" stands for."""
    if re.search(r"\bdevice\s+statuses\b", return_text):
        return return_text + " " + " ".join(device)
    return return_text
