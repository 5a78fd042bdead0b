#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""PyTorch peers of bench/bench_memory.cpp, measured the same way (medians of
15 runs of 20 iterations, after a warm-up), in the default caching allocator.

Prints PEER|id|what|value|unit lines:
  torch_loop_<S>   x = torch.empty(S bytes, uint8, cuda); x.index_fill_(0, idx, 1)
                   with a one-element index (a kernel touching it); del x;
                   torch.cuda.synchronize(), for S = 1 MiB, 64 MiB, 1 GiB
  torch_pair_<S>   torch.empty + del of S bytes, no sync: the Python and
                   allocator cost (informational: bench_memory's pair rows
                   compare with the raw driver)
"""
import time

import torch

MiB = 1 << 20


def median(samples):
    samples = sorted(samples)
    return samples[len(samples) // 2]


def peer(ident, what, value, unit):
    print(f"PEER|{ident}|{what}|{value:.1f}|{unit}", flush=True)


def timed_us(once, iters, reps):
    for _ in range(3):
        once()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            once()
        samples.append((time.perf_counter() - t0) / iters * 1e6)
    return median(samples)


def loop_us(nbytes):
    idx = torch.zeros(1, dtype=torch.long, device="cuda")

    def once():
        x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        x.index_fill_(0, idx, 1)
        del x
        torch.cuda.synchronize()

    return timed_us(once, 20, 15)


def pair_ns(nbytes):
    def once():
        x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        del x

    value = timed_us(once, 1000, 15) * 1e3
    torch.cuda.synchronize()
    return value


def name(nbytes):
    if nbytes >= 1 << 30:
        return f"{nbytes >> 30}GiB"
    if nbytes >= MiB:
        return f"{nbytes >> 20}MiB"
    if nbytes >= 1 << 10:
        return f"{nbytes >> 10}KiB"
    return f"{nbytes}B"


def main():
    torch.cuda.init()
    for n in (MiB, 64 * MiB, 1 << 30):
        s = name(n)
        peer(f"torch_loop_{s}", f"torch.empty {s}, index_fill_, del, synchronize", loop_us(n), "us")
    for n in (256, 4 << 10, 64 << 10, MiB, 16 * MiB, 64 * MiB):
        s = name(n)
        peer(f"torch_pair_{s}", f"torch.empty {s} + del, no sync", pair_ns(n), "ns")


if __name__ == "__main__":
    main()
