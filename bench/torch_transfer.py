#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""PyTorch peers of bench/bench_transfer.cpp, measured the same way (medians
of repeated loops), for tools/tuning/plot_transfers.py and the benchmark report.

Prints PEER|id|what|value|unit lines:
  torch_item_4B            x.item() of a one-element float32 CUDA tensor
  torch_item_after_20us    torch.cuda._sleep(20 us) then x.item(), same stream
  torch_upload_*_NMiB      t.copy_(host) from touched pageable / pinned + sync
  torch_cpu_<n>MiB         t.cpu(): a new pageable tensor each time (fresh)
  torch_pageable_<n>MiB    dst.copy_(t) into a touched pageable tensor
  torch_pinned_<n>MiB      dst.copy_(t) into a pinned tensor + synchronize
"""
import sys
import time

import torch

SIZES_MIB = (1, 4, 16, 64, 256, 1024)


def median_ns(fn, iters, reps=7):
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        samples.append((time.perf_counter() - t0) / iters * 1e9)
    samples.sort()
    return samples[len(samples) // 2]


def peer(ident, what, value, unit):
    print(f"PEER|{ident}|{what}|{value:.1f}|{unit}", flush=True)


def main(max_mib):
    x = torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    for _ in range(1000):
        x.item()
    peer("torch_item_4B", "torch x.item(), one float32", median_ns(x.item, 20000, 9), "ns")
    # x.item() behind 20 us of kernel work on the same stream (bench_transfer's
    # scalar_4B_after_20us): torch.cuda._sleep spins for a number of cycles,
    # calibrated here against CUDA events.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    cycles = int(10_000_000 * 0.020 / start.elapsed_time(end))  # elapsed_time is in ms

    def after_work():
        torch.cuda._sleep(cycles)
        x.item()

    for _ in range(100):
        after_work()
    peer("torch_item_after_20us", "torch.cuda._sleep(20 us) + x.item(), one float32",
         median_ns(after_work, 2000, 9), "ns")
    for mib in SIZES_MIB:
        if mib > max_mib:
            break
        n = mib << 20
        t = torch.ones(n // 4, device="cuda")
        torch.cuda.synchronize()
        iters = 1 if mib >= 256 else (3 if mib >= 64 else (10 if mib >= 16 else 30))
        reps = 5 if mib >= 1024 else 7
        fresh = median_ns(lambda: t.cpu(), iters, reps)
        page = torch.empty(n // 4)
        page.fill_(1)
        touched = median_ns(lambda: page.copy_(t), iters, reps)
        pin = torch.empty(n // 4, pin_memory=True)

        def pinned():
            pin.copy_(t, non_blocking=True)
            torch.cuda.synchronize()

        pinned()
        locked = median_ns(pinned, iters, reps)
        peer(f"torch_cpu_{mib}MiB", f"torch t.cpu() {mib} MiB (new pageable tensor)", n / fresh, "GB/s")
        peer(f"torch_pageable_{mib}MiB", f"torch copy_ {mib} MiB into touched pageable", n / touched, "GB/s")
        peer(f"torch_pinned_{mib}MiB", f"torch copy_ {mib} MiB into pinned + sync", n / locked, "GB/s")

        def upload(src):
            def run():
                t.copy_(src)
                torch.cuda.synchronize()
            return run

        up_page = median_ns(upload(page), iters, reps)
        up_pin = median_ns(upload(pin), iters, reps)
        peer(f"torch_upload_pageable_{mib}MiB", f"torch copy_ {mib} MiB from touched pageable + sync",
             n / up_page, "GB/s")
        peer(f"torch_upload_pinned_{mib}MiB", f"torch copy_ {mib} MiB from pinned + sync",
             n / up_pin, "GB/s")
        del t, page, pin


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("torch_transfer: no CUDA device")
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
