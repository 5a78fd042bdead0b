#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The Python binding's per-call cost of allocation and a small GEMM
against PyTorch's, in one process on a GPU (tools/gpu/run-bench runs it
when PyTorch sees one).  Samples of the two sides alternate.

  py_empty_4k        rt.empty(4 KiB, uint8) + del vs torch.empty + del,
                     no sync; goal <= 1.0x PyTorch
  py_empty_64m       the same at 64 MiB; goal <= 1.0x PyTorch
  py_matmul64_own    tenferro_gpu.blas.matmul 64x64 float32 on
                     DeviceBuffers vs torch.mm(a, b, out=c), enqueue only
                     (sustained; both streams are synced between samples);
                     goal <= 1.0x PyTorch
  py_matmul64_torch  blas.matmul on the torch tensors themselves vs
                     torch.mm(out=); goal <= 1.0x PyTorch

Prints RESULT lines (bench/bench_util.h's format) and an INFO line naming
the library and whether the C extension is on.  The binding comes from
bindings/python and the library from build/lib unless TENFERRO_GPU_LIBRARY
names one.
"""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
_built = os.path.join(ROOT, "build", "lib", "libtenferro_gpu.so.1")
if "TENFERRO_GPU_LIBRARY" not in os.environ and os.path.exists(_built):
    os.environ["TENFERRO_GPU_LIBRARY"] = _built

import torch  # noqa: E402

import tenferro_gpu as tg  # noqa: E402
from torch_python_scalar import paired  # noqa: E402  (bench/, beside this file)


def result(ident, what, lib, base, unit, goal):
    ratio = lib / base if base > 0 else 0.0
    print(f"RESULT|{ident}|{what}|{lib:.1f}|torch|{base:.1f}|{unit}|{ratio:.3f}|"
          f"<= {goal}x torch|{'yes' if ratio <= goal else 'NO'}", flush=True)


def empty_rows(rt):
    for ident, nbytes in (("py_empty_4k", 4 << 10), ("py_empty_64m", 64 << 20)):
        def ours():
            x = rt.empty(nbytes, "uint8")
            del x

        def theirs():
            x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            del x
        for _ in range(200):                 # both caches warm
            ours()
            theirs()
        lib, base = paired(ours, theirs, 2000, 15, between=rt.sync)
        result(ident, f"rt.empty({nbytes} B) + del vs torch.empty + del, no sync",
               lib, base, "ns", 1.0)


def matmul_rows(rt, stream):
    n = 64
    with torch.cuda.stream(stream.torch_stream()):
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        c = torch.empty(n, n, device="cuda")
    da, db, dc = rt.empty((n, n)), rt.empty((n, n)), rt.empty((n, n))
    torch.cuda.synchronize()

    def sync_both():
        stream.sync()
        torch.cuda.synchronize()

    def theirs():
        torch.mm(a, b, out=c)
    for ident, operands in (("py_matmul64_own", (da, db, dc)), ("py_matmul64_torch", (a, b, c))):
        def ours(x=operands[0], y=operands[1], z=operands[2]):
            tg.blas.matmul(stream, x, y, z, n, n, n)
        for _ in range(100):
            ours()
            theirs()
        lib, base = paired(ours, theirs, 2000, 15, between=sync_both)
        what = "DeviceBuffers" if ident.endswith("own") else "torch tensors"
        result(ident, f"blas.matmul 64x64 float32 on {what} vs torch.mm(out=), enqueue",
               lib, base, "ns", 1.0)
    for buf in (da, db, dc):
        buf.free()


def main():
    rt = tg.Runtime(0)
    stream = rt.bind_stream()
    print(f"INFO|python_calls|tenferro_gpu {tg.library_version_string()} from "
          f"{tg.library_path()}, Python {sys.version.split()[0]}, C extension "
          f"{'on' if tg.speedups_enabled() else 'off'}", flush=True)
    torch.zeros(1, device="cuda")
    empty_rows(rt)
    matmul_rows(rt, stream)
    stream.sync()
    stream.close()
    rt.close()


if __name__ == "__main__":
    main()
