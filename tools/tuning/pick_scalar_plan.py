#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Picks tf_download_scalar's read plan from a bench/tune_scalar log.

Usage: pick_scalar_plan.py LOG [--apply] [--smoke]

Prints where an idle read's time goes (the RAW components), the library's
address check of its own and of foreign memory, the library as compiled,
and every plan measured; then picks:

  idle path  the fastest read on an idle stream, over the plans whose idle
             and busy paths differ (they ask cuStreamQuery) and those whose
             paths are the same (no query: that path serves both cases);
  busy path  the fastest 20 us kernel + read;
  spin       the shortest spin within 2% of the best for the chosen paths
             (idle and busy times summed as ratios to copy + wait).

A plan whose two paths are the same skips the query; it is picked only when
it is at least as fast as the best pair in both cases.  --apply writes
kScalarIdlePath, kScalarBusyPath and kScalarSpin into
src/transfer/scalar_read.h and the scalar rows of the defaults table of
docs/transfers.md; nothing else is touched.  --smoke checks that a log from
the driver double parses and picks, and writes nothing.
"""
import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = "src/transfer/scalar_read.h"
DOCS = "docs/transfers.md"
PATHS = ("copy_sync", "copy_flag", "kernel")
ENUM = {"copy_sync": "ScalarPath::copy_sync", "copy_flag": "ScalarPath::copy_flag",
        "kernel": "ScalarPath::kernel"}
WORDS = {"copy_sync": "copy and wait", "copy_flag": "copy and flag", "kernel": "kernel"}


def fields(line):
    out = {}
    for part in line.split()[1:]:
        k, _, v = part.partition("=")
        out[k] = float(v) if k == "ns" else int(v) if k == "spin_us" else v
    return out


def parse(path):
    log = {"raw": defaultdict(list), "check": {}, "lib": {}, "plan": [], "info": {},
           "mismatch": []}
    for line in open(path, errors="replace"):
        tag = line.split(" ", 1)[0]
        if tag == "RAW":
            f = fields(line)
            log["raw"][f["what"]].append(f["ns"])
        elif tag == "CHECK":
            f = fields(line)
            log["check"][f["what"]] = f["ns"]
        elif tag == "LIB":
            f = fields(line)
            log["lib"][f["what"]] = f["ns"]
        elif tag == "PLAN":
            log["plan"].append(fields(line))
        elif tag == "INFO":
            k, _, v = line.split(" ", 1)[1].strip().partition("=")
            log["info"][k] = v
        elif tag == "MISMATCH":
            log["mismatch"].append(line.strip())
    return log


def pick(log, tolerance):
    """(idle path, busy path, spin us, table) from the PLAN rows."""
    cells = {}
    for r in log["plan"]:
        cells[(r["stage"], r["idle"], r["busy"], r["spin_us"])] = r["ns"]
    spins = sorted({k[3] for k in cells})
    raw = {k: sum(v) / len(v) for k, v in log["raw"].items()}
    idle_base = raw.get("copy_sync") or 1.0
    busy_base = raw.get("busy_copy_sync") or 1.0

    def cost(idle, busy, spin):
        a = cells.get(("idle", idle, busy, spin))
        b = cells.get(("busy", idle, busy, spin))
        if a is None or b is None:
            return None
        return a / idle_base + b / busy_base

    best = None
    for spin in spins:
        for idle in PATHS:
            for busy in PATHS:
                c = cost(idle, busy, spin)
                if c is not None and (best is None or c < best[0]):
                    best = (c, idle, busy, spin)
    if best is None:
        return None
    _, idle, busy, _ = best
    near = [s for s in spins if cost(idle, busy, s) is not None and
            cost(idle, busy, s) <= (1 + tolerance) * best[0]]
    return idle, busy, min(near), cells, raw


def show(log, chosen):
    idle, busy, spin, cells, raw = chosen
    info = log["info"]
    print(f"{info.get('device', '?')}\n")
    print("Driver calls alone (ns; mean of the runs before and after the plans):")
    for k, v in raw.items():
        print(f"  {k:22s} {v:10.1f}")
    if "copy_sync" in raw and "query_idle" in raw and "write_value_enqueue" in raw:
        print(f"  an idle read by copy + flag costs the query ({raw['query_idle']:.0f}) + "
              f"the write's enqueue ({raw['write_value_enqueue']:.0f}) on top of the copy's")
    print()
    if log["check"]:
        print("Address check (ns): " + ", ".join(f"{k} {v:.1f}" for k, v in log["check"].items()))
    if log["lib"]:
        print("Library as compiled (ns): " + ", ".join(f"{k} {v:.1f}" for k, v in log["lib"].items()))
        if "idle" in log["lib"] and "copy_sync" in raw:
            print(f"  idle: {log['lib']['idle'] / raw['copy_sync']:.3f}x copy + wait (goal <= 1.0x)")
        if "busy" in log["lib"] and "busy_copy_sync" in raw:
            print(f"  busy: {log['lib']['busy'] / raw['busy_copy_sync']:.3f}x work + copy + wait")
    print()
    print(f"{'idle path':10} {'busy path':10} {'spin':>6} {'idle ns':>10} {'busy ns':>10}")
    spins = sorted({k[3] for k in cells})
    for s in spins:
        for i in PATHS:
            for b in PATHS:
                a, c = cells.get(("idle", i, b, s)), cells.get(("busy", i, b, s))
                if a is None or c is None:
                    continue
                mark = "  <- pick" if (i, b, s) == (idle, busy, spin) else ""
                print(f"{i:10} {b:10} {s:6d} {a:10.1f} {c:10.1f}{mark}")
    print(f"\nPick: idle {idle}, busy {busy}, spin {spin} us"
          + ("  (one path: no cuStreamQuery)" if idle == busy else ""))


def edits(idle, busy, spin):
    return [
        (HEADER, r"constexpr ScalarPath kScalarIdlePath = .*;",
         f"constexpr ScalarPath kScalarIdlePath = {ENUM[idle]};"),
        (HEADER, r"constexpr ScalarPath kScalarBusyPath = .*;",
         f"constexpr ScalarPath kScalarBusyPath = {ENUM[busy]};"),
        (HEADER, r"constexpr std::chrono::microseconds kScalarSpin\{\d+\};",
         f"constexpr std::chrono::microseconds kScalarSpin{{{spin}}};"),
        (DOCS, r"\| scalar read, idle stream \| [^|]* \|(.*)",
         ("scalar read, idle stream", WORDS[idle])),
        (DOCS, r"\| scalar read, work queued \| [^|]* \|(.*)",
         ("scalar read, work queued", WORDS[busy])),
        (DOCS, r"\| scalar read spin \| [^|]* \|(.*)", ("scalar read spin", f"{spin} us")),
    ]


def apply_edits(changes, write):
    missing = []
    for path, pattern, new in changes:
        full = os.path.join(ROOT, path)
        lines = open(full).read().split("\n")
        for i, line in enumerate(lines):
            m = re.fullmatch(pattern, line.strip() if path != DOCS else line)
            if not m:
                continue
            if path == DOCS:
                repl = f"| {new[0]} | {new[1]} |{m.group(1)}"
            else:
                repl = line[:len(line) - len(line.lstrip())] + new
            if repl != line:
                print(f"  {path}:{i + 1}\n    - {line.strip()}\n    + {repl.strip()}")
                lines[i] = repl
            break
        else:
            missing.append((path, pattern))
            print(f"  {path}: NO LINE MATCHES {pattern!r}")
        if write:
            open(full, "w").write("\n".join(lines))
    return missing


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--apply", action="store_true")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    log = parse(a.log)
    if log["mismatch"]:
        sys.exit(f"{a.log}: a read returned a wrong value: {log['mismatch'][0]}")
    chosen = pick(log, a.tolerance)
    if chosen is None:
        sys.exit(f"{a.log}: no plan measured both idle and busy (PLAN lines: {len(log['plan'])})")
    show(log, chosen)
    print("\nSource lines:")
    missing = apply_edits(edits(*chosen[:3]), a.apply and not a.smoke)
    if missing:
        sys.exit("a line the pick would change was not found")
    if not a.apply:
        print("  (rerun with --apply to write them; then make check, and make bench on the GPU)")


if __name__ == "__main__":
    main()
