#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The Python binding's scalar read against PyTorch's x.item(), on a GPU
(tools/gpu/run-bench runs it when PyTorch sees one).

Both read one float32 on the same stream: a runtime's stream slot, which
PyTorch uses through torch.cuda.ExternalStream.

  py_scalar_idle        rt.download_scalar(buf, "f") on an idle stream, vs
                        x.item(); goal <= 1.0x PyTorch
  py_scalar_after_20us  each read queued after 20 us of work on the stream
                        (torch.cuda._sleep, calibrated with CUDA events);
                        enqueue + read per iteration, vs the same with
                        x.item(); goal <= 0.8x PyTorch

Prints RESULT lines (bench/bench_util.h's format) and INFO lines.  The
binding comes from bindings/python and the library from build/lib unless
TENFERRO_GPU_LIBRARY names one.
"""
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
_built = os.path.join(ROOT, "build", "lib", "libtenferro_gpu.so.1")
if "TENFERRO_GPU_LIBRARY" not in os.environ and os.path.exists(_built):
    os.environ["TENFERRO_GPU_LIBRARY"] = _built

import torch  # noqa: E402

import tenferro_gpu as tg  # noqa: E402

WORK_US = 20


def result(ident, what, lib, base_name, base, unit, goal, limit):
    ratio = lib / base if base > 0 else 0.0
    print(f"RESULT|{ident}|{what}|{lib:.1f}|{base_name}|{base:.1f}|{unit}|{ratio:.3f}|"
          f"<= {goal}x torch|{'yes' if ratio <= limit else 'NO'}", flush=True)


def paired(a, b, iters, reps, between=None):
    """Medians (ns per call) of a and b, in alternating samples; between()
    runs before each sample, outside the timed loop."""
    va, vb = [], []
    for _ in range(reps):
        for f, v in ((a, va), (b, vb)):
            if between is not None:
                between()
            t0 = time.perf_counter_ns()
            for _ in range(iters):
                f()
            v.append((time.perf_counter_ns() - t0) / iters)
    va.sort()
    vb.sort()
    return va[len(va) // 2], vb[len(vb) // 2]


def sleep_cycles_per_us(stream):
    """GPU clock cycles of torch.cuda._sleep per microsecond, measured."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 10_000_000
    with torch.cuda.stream(stream):
        torch.cuda._sleep(cycles // 10)      # warm up
        start.record(stream)
        torch.cuda._sleep(cycles)
        end.record(stream)
    end.synchronize()
    return cycles / (start.elapsed_time(end) * 1000.0)


def main():
    rt = tg.Runtime(0)
    stream = rt.bind_stream()
    ext = stream.torch_stream()
    buf = rt.empty(1, "float32")
    stream.upload(bytes(4), buf)
    with torch.cuda.stream(ext):
        x = torch.ones(1, device="cuda")
    stream.sync()
    print(f"INFO|python_binding|tenferro_gpu {tg.library_version_string()} from "
          f"{tg.library_path()}, C extension {'on' if tg.speedups_enabled() else 'off'}",
          flush=True)

    def ours():
        return rt.download_scalar(buf, "f")

    def theirs():
        return x.item()

    with stream, torch.cuda.stream(ext):
        for _ in range(2000):
            ours()
            theirs()
        lib, base = paired(ours, theirs, 2000, 15)
        result("py_scalar_idle", "rt.download_scalar 4 B (Python), idle stream, vs torch "
               "x.item()", lib, "torch x.item()", base, "ns", "1.0", 1.0)

        cycles = int(WORK_US * sleep_cycles_per_us(ext))
        print(f"INFO|python_scalar_sleep_cycles|{cycles} cycles of torch.cuda._sleep "
              f"for {WORK_US} us", flush=True)

        def ours_loaded():
            torch.cuda._sleep(cycles)
            return rt.download_scalar(buf, "f")

        def theirs_loaded():
            torch.cuda._sleep(cycles)
            return x.item()
        lib, base = paired(ours_loaded, theirs_loaded, 500, 15)
        result("py_scalar_after_20us", f"rt.download_scalar 4 B (Python) after {WORK_US} us "
               "of work on the stream, vs torch x.item() after the same", lib,
               "torch x.item() after the same work", base, "ns", "0.8", 0.8)
    buf.free()
    stream.close()
    rt.close()


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("torch_python_scalar: no CUDA device")
    main()
