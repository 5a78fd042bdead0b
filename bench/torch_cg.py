#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The conjugate-gradient iteration of bench_graph in PyTorch, as its users
write it: the same matrix (the 1-D Laplacian plus 0.001 on the diagonal,
dense float32), b = 1, x0 = 0; per iteration a GEMV (torch.mv), two dots,
the updates of x, r and p, and .item() of r.r as the convergence test.  With
the body captured by torch.cuda.graph (default capture mode) and replayed,
and without a graph, each timed from the start over the same number of
iterations as bench_graph, medians of 15.

Prints PEER|torch_cg<n>_graph and PEER|torch_cg<n>_nograph (ns per
iteration); tools/gpu/bench_report.py divides the library's cg<n>_graph row
by the first (the COMPARE lines bench_graph prints)."""
import time

import torch

TOLERANCE = 1e-30  # a convergence test that must not stop the timing


class Cg:
    def __init__(self, n):
        self.n = n
        a = torch.zeros(n, n, device="cuda")
        i = torch.arange(n, device="cuda")
        a[i, i] = 2.001
        a[i[1:], i[:-1]] = -1.0
        a[i[:-1], i[1:]] = -1.0
        self.a = a
        self.x = torch.zeros(n, device="cuda")
        self.r = torch.ones(n, device="cuda")
        self.p = torch.ones(n, device="cuda")
        self.ap = torch.empty(n, device="cuda")
        self.rr = torch.tensor(float(n), device="cuda")
        self.pap = torch.empty((), device="cuda")
        self.alpha = torch.empty((), device="cuda")
        self.rr_new = torch.empty((), device="cuda")
        self.beta = torch.empty((), device="cuda")

    def reset(self):
        self.x.zero_()
        self.r.fill_(1.0)
        self.p.fill_(1.0)
        self.rr.fill_(float(self.n))
        torch.cuda.synchronize()

    def body(self):
        torch.mv(self.a, self.p, out=self.ap)
        torch.dot(self.p, self.ap, out=self.pap)
        torch.div(self.rr, self.pap, out=self.alpha)
        self.x.addcmul_(self.alpha, self.p)
        self.r.addcmul_(self.alpha, self.ap, value=-1.0)
        torch.dot(self.r, self.r, out=self.rr_new)
        torch.div(self.rr_new, self.rr, out=self.beta)
        self.rr.copy_(self.rr_new)
        self.p.mul_(self.beta).add_(self.r)


def median_ns(cg, iteration, iters, reps=15):
    samples = []
    for _ in range(reps):
        cg.reset()
        t0 = time.perf_counter()
        for _ in range(iters):
            if iteration() < TOLERANCE:
                break
        samples.append((time.perf_counter() - t0) / iters * 1e9)
    samples.sort()
    return samples[len(samples) // 2]


def main():
    for n, iters in ((512, 200), (8192, 50)):
        cg = Cg(n)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up before capture, as torch.cuda.graph asks
            for _ in range(3):
                cg.body()
        torch.cuda.current_stream().wait_stream(side)
        cg.reset()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            cg.body()

        def plain():
            cg.body()
            return cg.rr.item()

        def replay():
            graph.replay()
            return cg.rr.item()

        ns = median_ns(cg, replay, iters)
        print(f"PEER|torch_cg{n}_graph|CG iteration at n = {n}, torch.cuda.graph of the body "
              f"+ .item()|{ns:.1f}|ns", flush=True)
        ns = median_ns(cg, plain, iters)
        print(f"PEER|torch_cg{n}_nograph|CG iteration at n = {n}, PyTorch without a graph "
              f"+ .item()|{ns:.1f}|ns", flush=True)


if __name__ == "__main__":
    main()
