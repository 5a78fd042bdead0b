#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Picks the pageable download defaults from a bench/tune_download log.

    tools/tuning/pick_download_defaults.py LOG [--tolerance 0.02] [--apply]
    tools/tuning/pick_download_defaults.py --smoke LOG      (make check: parse, pick, no goals)

Reads the TUNE, DRIVER, CURRENT and FAULT lines of `tune_download` (make
tune-download on the GPU machine), joins the small-size plans (1, 4, 16 MiB)
with the large-size plans (64, 256 MiB) that share their common settings,
and scores each joint plan cell by cell against the goals: touched pageable
>= 2x the driver, fresh (never touched) >= 3x.  The pick:

  1. meets the most goals;
  2. then has the best geometric mean of library / (goal x driver) over all
     cells, or is within --tolerance of it while costing less: less pinned
     staging per slot (depth x chunk), then fewer threads;
  3. the spin time is the shortest within --tolerance of the best spin-stage
     result (idle copy threads burn CPU for that long).

Prints the table of the pick against the driver and the library as compiled,
the runners-up, what each setting is worth on its own, the CPU-only fault
rows, and the exact source lines to change.  --apply rewrites those lines
(include/tenferro_gpu.h, src/transfer/download_plan.h, the defaults table of
docs/transfers.md, and the Go, Rust and Julia bindings' copies of the two
public defaults); nothing else is touched.
"""
import argparse
import math
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOALS = {"touched": 2.0, "fresh": 3.0}
KINDS = ("touched", "fresh")
MiB = 1 << 20
KiB = 1 << 10

# The previous library (fixed 4-step split, one mutex-guarded piece queue),
# H200 run quoted in the tuning brief: GB/s at the then defaults (8 threads,
# 8 MiB chunks).  For the "at least as good" comparison only.
PREVIOUS = {
    (1 * MiB, "touched"): 10.7, (1 * MiB, "fresh"): 3.1,
    (4 * MiB, "touched"): 16.1, (4 * MiB, "fresh"): 4.7,
    (16 * MiB, "touched"): 21.9, (16 * MiB, "fresh"): 7.3,
    (64 * MiB, "touched"): 29.1, (64 * MiB, "fresh"): 8.5,
    (256 * MiB, "touched"): 33.2, (256 * MiB, "fresh"): 8.8,
}

SMALL_KEY = ("threads", "depth", "issue", "step_scale", "min_piece", "per_thread", "populate")
LARGE_KEY = ("threads", "chunk", "depth", "issue", "step_scale", "per_thread", "populate")
JOINT_KEY = ("threads", "chunk", "depth", "issue", "step_scale", "min_piece", "per_thread",
             "populate")
INT_FIELDS = {"size", "threads", "chunk", "depth", "step_scale", "min_piece", "per_thread",
              "populate", "spin_us", "step"}


def fields(line):
    out = {}
    for part in line.split()[1:]:
        k, _, v = part.partition("=")
        if k == "gbps":
            out[k] = float(v)
        elif k in INT_FIELDS:
            out[k] = int(v)
        else:
            out[k] = v
    return out


def parse(path):
    log = {"driver": defaultdict(list), "current": {}, "tune": [], "fault": [], "info": {},
           "skip": [], "mismatch": []}
    for line in open(path, errors="replace"):
        tag = line.split(" ", 1)[0]
        if tag == "DRIVER":
            f = fields(line)
            log["driver"][(f["size"], f["kind"])].append(f["gbps"])
        elif tag == "CURRENT":
            f = fields(line)
            log["current"][(f["size"], f["kind"])] = f["gbps"]
        elif tag == "TUNE":
            log["tune"].append(fields(line))
        elif tag == "FAULT":
            log["fault"].append(fields(line))
        elif tag == "INFO":
            k, _, v = line.split(" ", 1)[1].strip().partition("=")
            log["info"][k] = v
        elif tag == "SKIP":
            log["skip"].append(line.strip())
        elif tag == "MISMATCH":
            log["mismatch"].append(line.strip())
    return log


def driver_mean(log):
    return {k: sum(v) / len(v) for k, v in log["driver"].items()}


def table(rows, key):
    """{key tuple: {(size, kind): gbps}} for the TUNE rows of one stage."""
    out = defaultdict(dict)
    for r in rows:
        if r["kind"] in KINDS:
            out[tuple(r[k] for k in key)][(r["size"], r["kind"])] = r["gbps"]
    return out


def joint_plans(log):
    small = table([r for r in log["tune"] if r["stage"] == "small"], SMALL_KEY)
    large = table([r for r in log["tune"] if r["stage"] == "large"], LARGE_KEY)
    plans = {}
    for lk, lcells in large.items():
        l = dict(zip(LARGE_KEY, lk))
        for sk, scells in small.items():
            s = dict(zip(SMALL_KEY, sk))
            if any(s[k] != l[k] for k in SMALL_KEY if k in l):
                continue
            j = dict(l, min_piece=s["min_piece"])
            cells = dict(scells)
            cells.update(lcells)
            plans[tuple(j[k] for k in JOINT_KEY)] = cells
    return plans


def score(cells, driver, cell_set):
    met, logs, worst = 0, 0.0, float("inf")
    for c in cell_set:
        q = cells[c] / (GOALS[c[1]] * driver[c])
        met += q >= 1
        logs += math.log(q)
        worst = min(worst, q)
    return met, math.exp(logs / len(cell_set)), worst


def cost(plan):
    p = dict(zip(JOINT_KEY, plan))
    return (p["depth"] * p["chunk"], p["threads"], p["per_thread"], -p["min_piece"])


def pick(plans, driver, tolerance):
    cell_set = sorted({c for cells in plans.values() for c in cells})
    complete = {k: v for k, v in plans.items() if all(c in v for c in cell_set)}
    if not complete:
        return None, [], cell_set
    scored = sorted(((score(v, driver, cell_set), k) for k, v in complete.items()),
                    key=lambda t: (t[0][0], t[0][1]), reverse=True)
    best_met, best_geo = scored[0][0][0], scored[0][0][1]
    near = [(s, k) for s, k in scored if s[0] == best_met and s[1] >= (1 - tolerance) * best_geo]
    chosen = min(near, key=lambda t: cost(t[1]))
    return chosen, scored, cell_set


def pick_spin(log, driver, tolerance):
    rows = [r for r in log["tune"] if r["stage"] == "spin" and r["kind"] in KINDS]
    by = defaultdict(dict)
    for r in rows:
        by[r["spin_us"]][(r["size"], r["kind"])] = r["gbps"]
    if not by:
        return None, {}
    cells = sorted(set.intersection(*(set(v) for v in by.values())))
    geo = {s: math.exp(sum(math.log(v[c] / driver[c]) for c in cells) / len(cells))
           for s, v in by.items()}
    best = max(geo.values())
    return min(s for s, g in geo.items() if g >= (1 - tolerance) * best), geo


def fmt_bytes(n):
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n // KiB} KiB" if n % KiB == 0 else f"{n} B"


def show_pick(log, driver, chosen, cell_set):
    (met, geo, worst), key = chosen
    p = dict(zip(JOINT_KEY, key))
    print(f"Pick: threads {p['threads']}, chunk {fmt_bytes(p['chunk'])}, depth {p['depth']}, "
          f"issue {p['issue']}, step scale {fmt_bytes(p['step_scale'])}, min piece "
          f"{fmt_bytes(p['min_piece'])}, {p['per_thread']} piece(s) per thread, populate "
          f"{'on' if p['populate'] else 'off'}")
    print(f"  goals met {met}/{len(cell_set)}; geometric mean of lib/(goal x driver) {geo:.3f}; "
          f"worst {worst:.3f}; pinned staging per slot {fmt_bytes(p['depth'] * p['chunk'])}\n")
    plans = joint_plans(log)
    cells = plans[key]
    print(f"{'size':>8} {'kind':8} {'driver':>7} {'compiled':>9} {'pick':>7} {'ratio':>6} "
          f"{'goal':>5} {'met':>4} {'previous':>9}")
    for size, kind in cell_set:
        d, lib = driver[(size, kind)], cells[(size, kind)]
        cur = log["current"].get((size, kind))
        prev = PREVIOUS.get((size, kind))
        print(f"{fmt_bytes(size):>8} {kind:8} {d:7.2f} "
              f"{(f'{cur:.2f}' if cur else '-'):>9} {lib:7.2f} {lib / d:5.2f}x "
              f"{GOALS[kind]:4.1f}x {'yes' if lib >= GOALS[kind] * d else 'NO':>4} "
              f"{(f'{prev:.2f}' if prev else '-'):>9}")
    worse = [f"{fmt_bytes(s)} {k} {cells[(s, k)]:.2f} < {PREVIOUS[(s, k)]:.2f}"
             for s, k in cell_set if (s, k) in PREVIOUS and cells[(s, k)] < 0.95 * PREVIOUS[(s, k)]]
    if worse:
        print("WARNING: more than 5% below the previous library's H200 run: " + "; ".join(worse))
    print()


def show_runners_up(scored, n=10):
    print(f"Top {min(n, len(scored))} joint plans (met, geomean, worst | {', '.join(JOINT_KEY)}):")
    for (met, geo, worst), key in scored[:n]:
        print(f"  {met:2d} {geo:6.3f} {worst:6.3f} | {key}")
    print()


def show_marginals(scored):
    print("Best geometric mean for each value of each setting (what it is worth alone):")
    for i, name in enumerate(JOINT_KEY):
        best = defaultdict(float)
        for (met, geo, worst), key in scored:
            best[key[i]] = max(best[key[i]], geo)
        vals = ", ".join(f"{fmt_bytes(v) if name in ('chunk', 'step_scale', 'min_piece') else v}"
                         f": {g:.3f}" for v, g in sorted(best.items()))
        print(f"  {name:11s} {vals}")
    print()


def show_spin(geo, spin):
    if not geo:
        return
    print("Spin stage (one plan; geometric mean of lib/driver over touched and fresh cells): " +
          ", ".join(f"{s} us: {g:.3f}" for s, g in sorted(geo.items())) + f" -> {spin} us\n")


def show_faults(log):
    if not log["fault"]:
        return
    print("Faulting fresh memory on the CPU alone (GB/s): touch / populate, split even / by 2 MiB")
    rows = defaultdict(dict)
    for f in log["fault"]:
        rows[(f["size"], f["threads"])][(f["mode"], f["split"])] = f["gbps"]
    for (size, threads), v in sorted(rows.items()):
        cells = " ".join(f"{m}/{s} {v.get((m, s), float('nan')):6.2f}"
                         for m in ("touch", "populate") for s in ("even", "2m"))
        print(f"  {fmt_bytes(size):>7} {threads:2d} threads: {cells}")
    print()


# ---- the source lines ---------------------------------------------------------

def source_file(name):
    """The one file called name under src/ (flat, or in a layer folder)."""
    hits = sorted(os.path.relpath(os.path.join(folder, name), ROOT)
                  for folder, _, files in os.walk(os.path.join(ROOT, "src")) if name in files)
    if len(hits) != 1:
        raise SystemExit(f"expected exactly one {name} under src/, found {hits or 'none'}")
    return hits[0]


def source_edits(p, spin):
    """(path, regex matching the whole line, new line) per default."""
    plan = source_file("download_plan.h")
    b = lambda v: "true" if v else "false"
    kib = lambda n: f"size_t({n // KiB}) << 10"
    edits = [
        ("include/tenferro_gpu.h", r"#define TF_DEFAULT_DOWNLOAD_THREADS \d+",
         f"#define TF_DEFAULT_DOWNLOAD_THREADS {p['threads']}"),
        ("include/tenferro_gpu.h", r"#define TF_DEFAULT_DOWNLOAD_CHUNK_BYTES \(\(uint32_t\)\d+ << 20\)",
         f"#define TF_DEFAULT_DOWNLOAD_CHUNK_BYTES ((uint32_t){p['chunk'] // MiB} << 20)"),
        # The bindings' copies of the two public defaults (check-values and
        # each binding's own header test compare them with the header).
        ("bindings/go/tenferro/runtime.go", r"DefaultDownloadThreads    = \d+",
         f"DefaultDownloadThreads    = {p['threads']}"),
        ("bindings/go/tenferro/runtime.go", r"DefaultDownloadChunkBytes = \d+ << 20",
         f"DefaultDownloadChunkBytes = {p['chunk'] // MiB} << 20"),
        ("bindings/rust/sys/src/header.rs", r"pub const TF_DEFAULT_DOWNLOAD_THREADS: u32 = \d+;",
         f"pub const TF_DEFAULT_DOWNLOAD_THREADS: u32 = {p['threads']};"),
        ("bindings/rust/sys/src/header.rs",
         r"pub const TF_DEFAULT_DOWNLOAD_CHUNK_BYTES: u32 = \d+ << 20;",
         f"pub const TF_DEFAULT_DOWNLOAD_CHUNK_BYTES: u32 = {p['chunk'] // MiB} << 20;"),
        ("bindings/julia/src/LibTenferro.jl", r"const TF_DEFAULT_DOWNLOAD_THREADS = \d+",
         f"const TF_DEFAULT_DOWNLOAD_THREADS = {p['threads']}"),
        ("bindings/julia/src/LibTenferro.jl", r"const TF_DEFAULT_DOWNLOAD_CHUNK_BYTES = \d+",
         f"const TF_DEFAULT_DOWNLOAD_CHUNK_BYTES = {p['chunk']}"),
        (plan, r"constexpr int kStagingDepth = \d+;",
         f"constexpr int kStagingDepth = {p['depth']};"),
        (plan, r"constexpr size_t kStepScale = .*;",
         f"constexpr size_t kStepScale = {kib(p['step_scale'])};"),
        (plan, r"constexpr size_t kMinPiece = .*;",
         f"constexpr size_t kMinPiece = {kib(p['min_piece'])};"),
        (plan, r"constexpr unsigned kPiecesPerThread = \d+;",
         f"constexpr unsigned kPiecesPerThread = {p['per_thread']};"),
        (plan, r"constexpr bool kPopulateFresh = \w+;",
         f"constexpr bool kPopulateFresh = {b(p['populate'])};"),
        (plan, r"constexpr bool kIssueAfterPost = \w+;",
         f"constexpr bool kIssueAfterPost = {b(p['issue'] == 'late')};"),
    ]
    if spin is not None:
        edits.append((plan,
                      r"constexpr std::chrono::microseconds kCopySpin\{\d+\};",
                      f"constexpr std::chrono::microseconds kCopySpin{{{spin}}};"))
    docs = {
        "download_threads": f"{p['threads']} (or the CPUs the process may run on, if fewer)",
        "download_chunk_bytes": fmt_bytes(p["chunk"]),
        "staging depth": str(p["depth"]),
        "step scale": fmt_bytes(p["step_scale"]),
        "min piece": fmt_bytes(p["min_piece"]),
        "pieces per thread": str(p["per_thread"]),
        "populate fresh pages": "on" if p["populate"] else "off",
        "issue order": "after posting the step" if p["issue"] == "late" else "after copying out",
    }
    if spin is not None:
        docs["spin"] = f"{spin} us"
    for name, value in docs.items():
        edits.append(("docs/transfers.md", r"\| " + re.escape(name) + r" \| [^|]* \|(.*)",
                      None if value is None else (name, value)))
    return edits


def plan_edits(p, spin):
    out = []
    for path, pattern, new in source_edits(p, spin):
        full = os.path.join(ROOT, path)
        lines = open(full).read().split("\n")
        for i, line in enumerate(lines):
            m = re.fullmatch(pattern, line.strip()) if path != "docs/transfers.md" else \
                re.fullmatch(pattern, line)
            if not m:
                continue
            if path == "docs/transfers.md":
                name, value = new
                replacement = f"| {name} | {value} |{m.group(1)}"
            else:
                indent = line[:len(line) - len(line.lstrip())]
                replacement = indent + new
            out.append((path, i, line, replacement))
            break
        else:
            out.append((path, None, pattern, new))
    return out


def show_edits(edits, apply):
    print("Source lines to change:" if any(l != r for _, i, l, r in edits if i is not None)
          else "Source lines: already the pick.")
    by_file = defaultdict(list)
    for path, i, old, new in edits:
        if i is None:
            print(f"  {path}: NO LINE MATCHES {old!r}; set it by hand to: {new}")
        elif old != new:
            print(f"  {path}:{i + 1}\n    - {old.strip()}\n    + {new.strip()}")
            by_file[path].append((i, new))
    if apply:
        for path, changes in by_file.items():
            full = os.path.join(ROOT, path)
            lines = open(full).read().split("\n")
            for i, new in changes:
                lines[i] = new
            open(full, "w").write("\n".join(lines))
        print("Applied." if by_file else "Nothing to apply.")
    elif by_file:
        print("  (rerun with --apply to write them; then make check, and make bench on the GPU)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--apply", action="store_true")
    ap.add_argument("--smoke", action="store_true",
                    help="a smoke log (driver double): check it parses and picks; no edits")
    a = ap.parse_args()
    log = parse(a.log)
    if log["mismatch"]:
        sys.exit(f"{a.log}: the sweep found downloads that lost bytes: {log['mismatch'][0]}")
    driver = driver_mean(log)
    plans = joint_plans(log)
    chosen, scored, cell_set = pick(plans, driver, a.tolerance)
    if chosen is None:
        sys.exit(f"{a.log}: no plan was measured at every size (TUNE lines: {len(log['tune'])})")
    info = log["info"]
    print(f"{info.get('device', '?')}, {info.get('host_cpus', '?')} CPUs, kernel "
          f"{info.get('kernel', '?')}, THP {info.get('thp', '?')}, MADV_POPULATE_WRITE "
          f"{'yes' if info.get('can_populate') == '1' else 'no'}; {len(plans)} joint plans")
    for s in log["skip"]:
        print(f"  note: {s} (the grid was cut by the time budget)")
    print()
    spin, spin_geo = pick_spin(log, driver, a.tolerance)
    show_pick(log, driver, chosen, cell_set)
    show_runners_up(scored)
    show_marginals(scored)
    show_spin(spin_geo, spin)
    show_faults(log)
    edits = plan_edits(dict(zip(JOINT_KEY, chosen[1])), spin)
    show_edits(edits, a.apply and not a.smoke)
    if a.smoke and any(i is None for _, i, _, _ in edits):
        sys.exit("smoke: a source line the pick would change was not found")


if __name__ == "__main__":
    main()
