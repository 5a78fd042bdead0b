#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""torch.mm n x n float32 enqueue into an existing output, n = 64, 128, 256:
the peer of bench_cublas's sgemm64_enqueue (sustained: 2000 in a row) and
sgemm64_enqueue_burst (bursts of 200), and of bench_cublaslt's lt_sgemm<n>
and lt_sgemm<n>_burst.

Prints PEER|torch_mm<n>|...|ns and PEER|torch_mm<n>_burst|...|ns;
tools/gpu/bench_report.py divides the library's rows by them (the COMPARE
lines bench_cublas and bench_cublaslt print)."""
import time

import torch


def median_ns(f, iters, reps=15):
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            f()
        samples.append((time.perf_counter() - t0) / iters * 1e9)
        torch.cuda.synchronize()  # drain between samples, outside the timing
    samples.sort()
    return samples[len(samples) // 2]


def main():
    for n in (64, 128, 256):
        a = torch.zeros(n, n, device="cuda")
        b = torch.zeros(n, n, device="cuda")
        # Into an existing output, as the library's GEMM writes its C: the
        # caching allocator's work per call is not part of the GEMM.
        c = torch.empty(n, n, device="cuda")
        for _ in range(300):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize()
        ns = median_ns(lambda: torch.mm(a, b, out=c), 2000)
        print(f"PEER|torch_mm{n}|torch.mm {n}x{n} float32 enqueue, sustained|{ns:.1f}|ns",
              flush=True)
        ns = median_ns(lambda: torch.mm(a, b, out=c), 200, reps=41)
        print(f"PEER|torch_mm{n}_burst|torch.mm {n}x{n} float32 enqueue, bursts of 200|"
              f"{ns:.1f}|ns", flush=True)


if __name__ == "__main__":
    main()
