#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""PyTorch peers of bench/bench_host.cpp, measured the same way (medians of
repeated loops).

Prints PEER|id|what|value|unit lines:
  torch_pin_alloc_1MiB   torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
                         + del (PyTorch's caching host allocator, warm)
  torch_copy_async_4MiB  dst.copy_(src, non_blocking=True) of 4 MiB from a CUDA
                         tensor into a pinned tensor: what queueing costs the
                         caller (batches of 32, synchronized untimed)
"""
import sys
import time

import torch


def median(samples):
    samples = sorted(samples)
    return samples[len(samples) // 2]


def peer(ident, what, value, unit):
    print(f"PEER|{ident}|{what}|{value:.1f}|{unit}", flush=True)


def pin_alloc_ns(iters=20000, reps=9):
    def once():
        t = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
        del t

    for _ in range(100):
        once()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            once()
        samples.append((time.perf_counter() - t0) / iters * 1e9)
    return median(samples)


def copy_enqueue_ns(batch=32, reps=31):
    src = torch.ones(4 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty(4 << 20, dtype=torch.uint8, pin_memory=True)
    torch.cuda.synchronize()
    samples = []
    for rep in range(reps + 1):
        t0 = time.perf_counter()
        for _ in range(batch):
            dst.copy_(src, non_blocking=True)
        elapsed = (time.perf_counter() - t0) / batch * 1e9
        torch.cuda.synchronize()
        if rep:
            samples.append(elapsed)
    return median(samples)


def main():
    peer("torch_pin_alloc_1MiB", "torch pinned empty 1 MiB + del", pin_alloc_ns(), "ns")
    peer("torch_copy_async_4MiB", "torch copy_(non_blocking) 4 MiB to pinned, enqueue cost",
         copy_enqueue_ns(), "ns")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("torch_host: no CUDA device")
    main()
