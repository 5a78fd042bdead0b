#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Builds the wheel of bindings/python with libtenferro_gpu.so.1 inside
(make python-wheel), offline, with nothing but the standard library.

The wheel (PEP 427) holds the package's modules and py.typed, the library
as tenferro_gpu/_lib/libtenferro_gpu.so.1 (the loader tries it before the
system's, _library.py), the C extension when `make python-speedups` built
one for this interpreter, and the license texts of the tree in its
.dist-info.  It is tagged for this platform (the library is native code)
and, with the C extension, for this interpreter; without it any CPython 3
on the platform can use it.

    build_wheel.py --package bindings/python --library build/lib/libtenferro_gpu.so.1.2.0 \\
        --licenses . --version 1.2.0 --out build/python
"""

from __future__ import annotations

import argparse
import base64
import glob
import hashlib
import os
import sys
import sysconfig
import zipfile
from typing import List, Tuple

NAME = "tenferro-gpu"
DIST = "tenferro_gpu"
SONAME = "libtenferro_gpu.so.1"
LICENSE = "MIT OR Apache-2.0"
LICENSE_FILES = ("LICENSE", "LICENSE-MIT", "LICENSE-APACHE")
# Fixed timestamps: the same inputs give the same wheel.
EPOCH = (1980, 1, 1, 0, 0, 0)


def _metadata(version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        "Summary: Drive one CUDA device's runtime (primary context, stream slots) "
        "through libtenferro_gpu.so.1",
        f"License: {LICENSE}",
        "Requires-Python: >=3.8",
        "Project-URL: Documentation, "
        "https://github.com/tensor4all/tenferro-gpu/blob/main/docs/python.md",
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Environment :: GPU :: NVIDIA CUDA",
        "Classifier: License :: OSI Approved :: MIT License",
        "Classifier: License :: OSI Approved :: Apache Software License",
        "Classifier: Typing :: Typed",
    ]
    lines += [f"License-File: {name}" for name in LICENSE_FILES]
    return "\n".join(lines) + "\n"


def _tag(with_extension: bool) -> str:
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    if with_extension:
        python = f"cp{sys.version_info[0]}{sys.version_info[1]}"
        return f"{python}-{python}-{platform}"
    return f"py3-none-{platform}"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build(package_dir: str, library: str, licenses: str, version: str, out: str) -> str:
    sources = os.path.join(package_dir, "tenferro_gpu")
    members: List[Tuple[str, bytes, int]] = []       # (path in the wheel, data, mode)
    extensions = sorted(glob.glob(os.path.join(
        sources, "_speedups" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))))
    for name in sorted(os.listdir(sources)):
        if name.endswith(".py") or name == "py.typed":
            with open(os.path.join(sources, name), "rb") as f:
                members.append((f"tenferro_gpu/{name}", f.read(), 0o644))
    for path in extensions:
        with open(path, "rb") as f:
            members.append((f"tenferro_gpu/{os.path.basename(path)}", f.read(), 0o755))
    with open(library, "rb") as f:
        members.append((f"tenferro_gpu/_lib/{SONAME}", f.read(), 0o755))
    info = f"{DIST}-{version}.dist-info"
    for name in LICENSE_FILES:
        with open(os.path.join(licenses, name), "rb") as f:
            members.append((f"{info}/{name}", f.read(), 0o644))
    tag = _tag(bool(extensions))
    members.append((f"{info}/METADATA", _metadata(version).encode(), 0o644))
    wheel = ("Wheel-Version: 1.0\nGenerator: tenferro-gpu build_wheel.py\n"
             f"Root-Is-Purelib: false\nTag: {tag}\n")
    members.append((f"{info}/WHEEL", wheel.encode(), 0o644))
    record = [_record_line(path, data) for path, data, _ in members]
    record.append(f"{info}/RECORD,,")
    members.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))

    os.makedirs(out, exist_ok=True)
    target = os.path.join(out, f"{DIST}-{version}-{tag}.whl")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data, mode in members:
            entry = zipfile.ZipInfo(path, EPOCH)
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", required=True, help="bindings/python")
    parser.add_argument("--library", required=True, help="the built libtenferro_gpu.so.1.x.y")
    parser.add_argument("--licenses", required=True, help="the folder of LICENSE*")
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    target = build(args.package, args.library, args.licenses, args.version, args.out)
    print(f"python-wheel: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
