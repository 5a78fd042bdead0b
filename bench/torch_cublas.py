#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""torch.mm 64x64 float32 enqueue into an existing output: the peer of
bench_cublas's sgemm64_enqueue (sustained: 2000 in a row) and
sgemm64_enqueue_burst (bursts of 200).

Prints PEER|torch_mm64|...|ns; tools/gpu/bench_report.py divides the library's
sgemm64_enqueue by it (the COMPARE line bench_cublas prints)."""
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
    a = torch.zeros(64, 64, device="cuda")
    b = torch.zeros(64, 64, device="cuda")
    # Into an existing output, as the library's GEMM writes its C: the
    # caching allocator's work per call is not part of the GEMM.
    c = torch.empty(64, 64, device="cuda")
    for _ in range(300):
        torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    ns = median_ns(lambda: torch.mm(a, b, out=c), 2000)
    print(f"PEER|torch_mm64|torch.mm 64x64 float32 enqueue, sustained|{ns:.1f}|ns", flush=True)
    ns = median_ns(lambda: torch.mm(a, b, out=c), 200, reps=41)
    print(f"PEER|torch_mm64_burst|torch.mm 64x64 float32 enqueue, bursts of 200|{ns:.1f}|ns",
          flush=True)


if __name__ == "__main__":
    main()
