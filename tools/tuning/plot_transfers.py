#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Draws download and upload bandwidth against size from a benchmark log.

    tools/tuning/plot_transfers.py LOG [OUT.png]     (default docs/transfer-bandwidth.png)

LOG is what tools/gpu/run-bench keeps beside the report (docs/benchmarks.log, or
$OUT/benchmarks.log of a GPU session): the RESULT|dl_<kind>_<n>MiB and
ul_pageable*_<n>MiB rows of bench_transfer (library, driver pageable and
page-locked) and, when present, the PyTorch PEER rows
of bench/torch_transfer.py.  Also prints the comparisons with PyTorch that no
single benchmark can make (the scalar download against x.item(), downloads
against t.cpu()), and, when the log holds SWEEP lines, the best settings.
"""
import re
import sys

KINDS = {
    "pinned": "page-locked destination",
    "pageable": "touched pageable destination",
    "fresh": "fresh pageable destination",
}
COLORS = {"pinned": "tab:blue", "pageable": "tab:orange", "fresh": "tab:green"}


def parse(path):
    rows, peers, sweep, driver = {}, {}, [], None
    for line in open(path):
        p = line.rstrip("\n").split("|")
        if p[0] == "RESULT" and len(p) == 10:
            rows[p[1]] = (float(p[3]), float(p[5]))
        elif p[0] == "PEER" and len(p) >= 5:
            peers[p[1]] = float(p[3])
        elif p[0] == "SWEEP" and len(p) == 5:
            sweep.append((int(p[1]), int(p[2]), float(p[3]), float(p[4])))
        elif p[0] == "SWEEP_DRIVER" and len(p) == 4:
            driver = (int(p[1]), float(p[2]), float(p[3]))
    return rows, peers, sweep, driver


def curves(rows):
    out = {k: [] for k in KINDS}
    for ident, (lib, base) in rows.items():
        m = re.fullmatch(r"dl_(pinned|pageable|fresh)_(\d+)MiB", ident)
        if m:
            out[m.group(1)].append((int(m.group(2)), lib, base))
    for k in out:
        out[k].sort()
    return out


def comparisons(rows, peers):
    lines = []
    if "scalar_4B" in rows and "torch_item_4B" in peers:
        lib, item = rows["scalar_4B"][0], peers["torch_item_4B"]
        lines.append(f"scalar 4 B: library {lib:.0f} ns, torch .item() {item:.0f} ns, "
                     f"ratio {lib / item:.2f} (goal <= 0.7): {'met' if lib <= 0.7 * item else 'MISSED'}")
    if "scalar_4B_after_20us" in rows and "torch_item_after_20us" in peers:
        lib, item = rows["scalar_4B_after_20us"][0], peers["torch_item_after_20us"]
        lines.append(f"scalar 4 B after 20 us of work: library {lib:.0f} ns, torch {item:.0f} ns, "
                     f"ratio {lib / item:.2f} (goal <= 0.85)")
    for ident, (lib, _) in sorted(rows.items()):
        m = re.fullmatch(r"ul_pageable_(\d+)MiB", ident)
        torch_bw = peers.get(f"torch_upload_pageable_{m.group(1)}MiB") if m else None
        if torch_bw:
            lines.append(f"{ident}: library {lib:.1f} GB/s, torch_upload_pageable {torch_bw:.1f} "
                         f"GB/s, x{lib / torch_bw:.2f}")
    for ident, (lib, _) in sorted(rows.items()):
        m = re.fullmatch(r"dl_(fresh|pageable|pinned)_(\d+)MiB", ident)
        if not m:
            continue
        peer_id = {"fresh": "torch_cpu", "pageable": "torch_pageable", "pinned": "torch_pinned"}[m.group(1)]
        torch_bw = peers.get(f"{peer_id}_{m.group(2)}MiB")
        if torch_bw:
            lines.append(f"{ident}: library {lib:.1f} GB/s, {peer_id} {torch_bw:.1f} GB/s, "
                         f"x{lib / torch_bw:.2f}")
    return lines


def sweep_summary(sweep, driver):
    if not sweep:
        return []
    lines = []
    if driver:
        lines.append(f"sweep of {driver[0] >> 20} MiB; driver: touched {driver[1]:.1f} GB/s, "
                     f"fresh {driver[2]:.1f} GB/s")
    for col, name in ((2, "touched"), (3, "fresh")):
        best = max(sweep, key=lambda r: r[col])
        lines.append(f"best {name}: {best[col]:.1f} GB/s with download_threads={best[0]}, "
                     f"download_chunk_bytes={best[1]} ({best[1] >> 20} MiB)")
    # The setting that is best for both at once: highest worse-of-the-two
    # relative to each column's best.
    top_t = max(r[2] for r in sweep)
    top_f = max(r[3] for r in sweep)
    both = max(sweep, key=lambda r: min(r[2] / top_t, r[3] / top_f))
    lines.append(f"best for both: threads={both[0]}, chunk={both[1] >> 20} MiB: touched "
                 f"{both[2]:.1f}, fresh {both[3]:.1f} GB/s")
    return lines


def upload_curves(rows):
    """size -> (library pageable, driver pageable, driver page-locked or None)."""
    out = {}
    for ident, (lib, base) in rows.items():
        m = re.fullmatch(r"ul_pageable_(\d+)MiB", ident)
        if m:
            out.setdefault(int(m.group(1)), [None, None, None])[0:2] = [lib, base]
        m = re.fullmatch(r"ul_pageable_vs_pinned_(\d+)MiB", ident)
        if m:
            out.setdefault(int(m.group(1)), [None, None, None])[2] = base
    return sorted((n, *v) for n, v in out.items() if v[0] is not None)


def peer_curve(peers, prefix):
    return sorted((int(m.group(1)), v) for k, v in peers.items()
                  if (m := re.fullmatch(prefix + r"_(\d+)MiB", k)))


def plot(data, uploads, peers, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, (down, up) = plt.subplots(1, 2, figsize=(14, 5))
    for kind, points in data.items():
        if not points:
            continue
        sizes = [p[0] for p in points]
        down.plot(sizes, [p[1] for p in points], "-o", color=COLORS[kind],
                  label=f"tenferro-gpu, {KINDS[kind]}")
        down.plot(sizes, [p[2] for p in points], "--x", color=COLORS[kind],
                  label=f"driver cuMemcpyDtoHAsync, {KINDS[kind]}")
    for prefix, style, what in (("torch_cpu", ":d", "PyTorch t.cpu() (fresh pageable)"),
                                ("torch_pageable", ":s", "PyTorch copy_ into touched pageable"),
                                ("torch_pinned", ":^", "PyTorch copy_ into page-locked")):
        c = peer_curve(peers, prefix)
        if c:
            down.plot([x[0] for x in c], [x[1] for x in c], style, color="gray", label=what)
    if uploads:
        sizes = [u[0] for u in uploads]
        up.plot(sizes, [u[1] for u in uploads], "-o", color="tab:orange",
                label="tenferro-gpu, touched pageable source")
        up.plot(sizes, [u[2] for u in uploads], "--x", color="tab:orange",
                label="driver cuMemcpyHtoDAsync, touched pageable source")
        pinned = [(u[0], u[3]) for u in uploads if u[3] is not None]
        if pinned:
            up.plot([p[0] for p in pinned], [p[1] for p in pinned], "--x", color="tab:blue",
                    label="driver cuMemcpyHtoDAsync, page-locked source")
    for prefix, style, what in (("torch_upload_pageable", ":s", "PyTorch copy_ from touched pageable"),
                                ("torch_upload_pinned", ":^", "PyTorch copy_ from page-locked")):
        c = peer_curve(peers, prefix)
        if c:
            up.plot([x[0] for x in c], [x[1] for x in c], style, color="gray", label=what)
    for ax, title, xlabel in ((down, "Device-to-host downloads", "download size (MiB)"),
                              (up, "Host-to-device uploads", "upload size (MiB)")):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel(xlabel)
        ax.set_ylabel("bandwidth (GB/s)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows, peers, sweep, driver = parse(sys.argv[1])
    for line in comparisons(rows, peers) + sweep_summary(sweep, driver):
        print(line)
    data = curves(rows)
    if any(data.values()):
        plot(data, upload_curves(rows), peers,
             sys.argv[2] if len(sys.argv) > 2 else "docs/transfer-bandwidth.png")
    elif not sweep:
        sys.exit("plot_transfers: no dl_* rows in the log")


if __name__ == "__main__":
    main()
