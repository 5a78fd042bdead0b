#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the Python binding adds to a library call (make bench-python).

For each call the C call is timed from C (bench/python_overhead.c, built
into a small shared library by the make target) and the binding's call
from Python, in the same process, on the same runtime and buffer, in
alternating samples (C, Python, C, Python, ...) so that drift on a shared
machine hits both.  Each sample is the mean of ITERS calls; the row gives
the medians of SAMPLES samples of each, the binding's overhead (the median
of each Python sample less the C sample before it) and whether it meets
its goal.  Against the double its call log is emptied before each sample.

    make bench-python                   # against the driver double
    python3 bench/python_overhead.py HELPER.so [--markdown FILE]

It runs against whatever libcuda.so.1 the library loads; `make
bench-python` puts the driver double first, where a call costs what the
library and the double do on the CPU and no device is involved, and the
double runs work as it is queued (TFD_EXEC_SYNC, as an idle GPU would).  --markdown
writes the table to FILE (docs/benchmarks-python.md, which
tools/gpu/bench_report.py appends to docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import sys
import time
from typing import Callable, List, Optional, Tuple

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import tenferro_gpu as tg  # noqa: E402
from tenferro_gpu import _capi  # noqa: E402

ITERS = 1000
SAMPLES = 61
TFD_EXEC_SYNC = 0          # tests/cuda_double/tfd_control.h

# call -> goal: the most the binding may add to the C call, in ns.
GOALS = {"download_scalar": 1000.0, "stream": 1000.0, "sync": 1000.0,
         "with_context": 1500.0}


def _helper(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    for name in ("tfpb_stream", "tfpb_sync", "tfpb_with_context"):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_void_p, ctypes.c_int32]
    lib.tfpb_download_scalar.restype = ctypes.c_double
    lib.tfpb_download_scalar.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32,
                                         ctypes.c_int32]
    return lib


def _python_ns(call: Callable[[], object], iters: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(iters):
        call()
    return (time.perf_counter_ns() - start) / iters


def measure(c_loop: Callable[[int], float],
            call: Callable[[], object]) -> Tuple[float, float, float]:
    """Medians (C, Python, Python - C) of alternating samples, ns per call.
    The overhead is the median of each Python sample less the C sample
    just before it, which a shared machine's drift disturbs least."""
    c_loop(ITERS // 10)                  # warm both up
    _python_ns(call, ITERS // 10)
    cs: List[float] = []
    ps: List[float] = []
    for _ in range(SAMPLES):
        _clear_double_log()
        c = c_loop(ITERS)
        if c < 0:
            raise SystemExit("bench-python: the C loop's call failed")
        cs.append(c)
        _clear_double_log()
        ps.append(_python_ns(call, ITERS))
    return (statistics.median(cs), statistics.median(ps),
            statistics.median(p - c for c, p in zip(cs, ps)))


_log_clear: Optional[Callable[[], None]] = None


def _clear_double_log() -> None:
    """Against the double, empty its call log, which otherwise grows by
    every call measured (and reallocates now and then, in either loop)."""
    if _log_clear is not None:
        _log_clear()


C_NAMES = {"download_scalar": "tf_download_scalar", "stream": "tf_runtime_stream",
           "sync": "tf_runtime_sync", "with_context": "tf_with_context"}


def rows(helper: ctypes.CDLL, path: str) -> List["Row"]:
    out = []
    with tg.Runtime(0) as rt, rt.empty(4, "float32") as buf:
        buf.upload(bytes(16))
        rt.sync()
        h, ptr = rt.handle, buf.ptr

        def nothing() -> None:
            pass
        cases = (
            ("download_scalar", 'rt.download_scalar(buf, "f")',
             lambda n: helper.tfpb_download_scalar(h, ptr, 4, n),
             lambda: rt.download_scalar(buf, "f")),
            ("stream", "rt.stream()", lambda n: helper.tfpb_stream(h, n), rt.stream),
            ("sync", "rt.sync()", lambda n: helper.tfpb_sync(h, n), rt.sync),
            ("with_context", "rt.with_context(fn)",
             lambda n: helper.tfpb_with_context(h, n), lambda: rt.with_context(nothing)),
        )
        for name, python, c_loop, call in cases:
            c, p, d = measure(c_loop, call)
            out.append((name, python, path, c, p, d))
    return out


Row = Tuple[str, str, str, float, float, float]


def table(results: List[Row]) -> List[str]:
    lines = ["| call | Python | binding path | C (ns) | Python (ns) | overhead (ns) | goal | met |",
             "| --- | --- | --- | ---: | ---: | ---: | --- | --- |"]
    for name, python, path, c, p, d in results:
        goal = GOALS[name]
        lines.append(f"| {C_NAMES[name]} | `{python}` | {path} | {c:.0f} | {p:.0f} | "
                     f"{d:.0f} | <= {goal:.0f} | {'yes' if d <= goal else 'NO'} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("helper", help="the shared library built from bench/python_overhead.c")
    parser.add_argument("--markdown", help="also write the table, with its context, here")
    args = parser.parse_args()
    helper = _helper(args.helper)
    global _log_clear
    tg.device_count()       # the library loads its driver: _double() can see it
    if _double():
        double = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        double.tfd_log_clear.restype, double.tfd_log_clear.argtypes = None, []
        _log_clear = double.tfd_log_clear
        # Work runs as it is queued, as on an idle GPU: in the double's
        # default (deferred) mode nothing completes on its own, so every
        # scalar read would spin its whole budget before it falls back.
        double.tfd_set_execution.restype = None
        double.tfd_set_execution.argtypes = [ctypes.c_int]
        double.tfd_set_execution(TFD_EXEC_SYNC)
        double.tfd_execution.restype, double.tfd_execution.argtypes = ctypes.c_int, []
        if double.tfd_execution() != TFD_EXEC_SYNC:
            raise SystemExit("bench-python: the double did not take TFD_EXEC_SYNC")
    extension = _capi.speedups if tg.speedups_enabled() else None
    results = []
    # The default path first (the C extension when built), then ctypes alone,
    # which is what an interpreter without the extension gets.
    if extension is not None:
        results += rows(helper, "C extension")
    _capi.speedups = None
    results += rows(helper, "ctypes")
    _capi.speedups = extension
    lines = table(results)
    print("\n".join(lines))
    default = [r for r in results if r[2] == results[0][2]]
    missed = [f"{r[0]} ({r[2]})" for r in results if r[5] > GOALS[r[0]]]
    where = (f"{platform.python_implementation()} {platform.python_version()}, "
             f"{tg.library_path()}, libcuda.so.1: "
             f"{'the driver double' if _double() else 'the real driver'}, "
             f"{os.cpu_count()} CPUs ({platform.machine()})")
    print(f"\n{where}; goals met: {len(results) - len(missed)} of {len(results)}"
          + (f" (missed: {', '.join(missed)})" if missed else ""))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(MARKDOWN_HEAD + "\n".join(lines) + "\n\n" +
                    f"Measured {time.strftime('%Y-%m-%d', time.gmtime())} with {where}.\n")
    return 1 if any(r[5] > GOALS[r[0]] for r in default) else 0


def _double() -> bool:
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    except OSError:
        return False
    return hasattr(lib, "tfd_reset")


MARKDOWN_HEAD = """
## Python binding overhead (driver double)

What the Python binding (`bindings/python`) adds to a call, measured by
`make bench-python` (`bench/python_overhead.py`): the C call timed from C
and the binding's call from Python in the same process, on one runtime,
against the CUDA driver double in its synchronous mode (work runs as it is
queued, as on an idle GPU: `tfd_set_execution(TFD_EXEC_SYNC)`),
alternating samples of 1000 calls each (61 of each); the overhead is the
median of each Python sample less the C sample before it.  The goal is
the most the binding may add.  "C extension" rows use the optional
`_speedups` module (`make python-speedups`, built when the interpreter's
headers are there), "ctypes" rows what an interpreter without it gets.  On
a shared machine the figures move by some hundred nanoseconds from run to
run.  This section is written by `make bench-python` into
`docs/benchmarks-python.md`, which `tools/gpu/bench_report.py` appends to
this file.

"""


if __name__ == "__main__":
    sys.exit(main())
