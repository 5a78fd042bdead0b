#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Builds the optional C extension tenferro_gpu/_speedups (make
python-speedups) in place, for the interpreter running this script, from
every C file of the folder that holds SOURCE (its headers are inputs too):

    build_speedups.py SOURCE PACKAGE

The headers (Python.h) are looked for where the interpreter says
(sysconfig's include and platinclude, which a virtual environment takes
from its base interpreter), under its base prefix, and in PYTHON_INCLUDE
when set (another build of the same Python version, e.g. a pyenv one).
Without headers or a C compiler it builds nothing, removes a stale
extension of the same interpreter, and says that the package uses ctypes
alone: the binding works either way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig


def _include_dir() -> str:
    """The first folder with Python.h for this interpreter (see above), or
    sysconfig's include when none has it (named in the message)."""
    paths = sysconfig.get_paths()
    tag = f"python{sys.version_info[0]}.{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    candidates = [os.environ.get("PYTHON_INCLUDE", ""), paths["include"],
                  paths.get("platinclude", ""),
                  os.path.join(sys.base_prefix, "include", tag)]
    for folder in candidates:
        if folder and os.path.exists(os.path.join(folder, "Python.h")):
            return folder
    return paths["include"]


def main(source: str, package: str) -> int:
    folder = os.path.dirname(os.path.abspath(source))
    sources = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".c"))
    inputs = sources + [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".h")]
    include = _include_dir()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = os.path.join(package, "_speedups" + suffix)
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    version = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    why = None
    if not os.path.exists(os.path.join(include, "Python.h")):
        why = f"no Python.h in {include} (Debian: python3-dev)"
    elif compiler is None:
        why = "no C compiler"
    if why is None:
        newest = max(os.path.getmtime(f) for f in inputs)
        if os.path.exists(target) and os.path.getmtime(target) >= newest:
            return 0
        cmd = [compiler, "-O2", "-fPIC", "-shared", "-Wall", "-Wextra",
               f"-I{include}", *sources, "-o", target]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode == 0:
            print(f"python-speedups: built {os.path.relpath(target)} for {version}"
                  + (f"\n{done.stderr.strip()}" if done.stderr.strip() else ""))
            return 0
        why = f"{compiler} failed:\n{done.stderr.strip()}"
    if os.path.exists(target):
        os.remove(target)
    print(f"python-speedups: SKIPPED for {version}: {why}; the package uses ctypes alone")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
