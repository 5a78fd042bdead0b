#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Turns the RESULT/INFO/PEER lines the benchmarks print into markdown.

    bench_report.py LOG > docs/benchmarks.md
    bench_report.py --python-section docs/benchmarks.md docs/benchmarks-python.md

The report ends with the Python binding's overhead section, measured
against the driver double by `make bench-python` and kept in
docs/benchmarks-python.md, so regenerating the GPU rows keeps it; the
second form refreshes just that section (make bench-python runs it)."""
import datetime
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON_SECTION = os.path.join(ROOT, "docs", "benchmarks-python.md")
PYTHON_HEADING = "## Python binding overhead (driver double)"


def with_python_section(report, section_path=PYTHON_SECTION):
    """`report` without any Python section, then the committed one."""
    at = report.find("\n" + PYTHON_HEADING)
    if at >= 0:
        report = report[:at].rstrip("\n") + "\n"
    if not os.path.exists(section_path):
        return report
    with open(section_path) as f:
        return report.rstrip("\n") + "\n" + f.read()


def compare_rows(compares, rows, peers):
    """COMPARE|id|what|result id|peer id|goal: the library's value in RESULT
    row `result id` over the PEER value `peer id` (same unit), met when the
    ratio is at most `goal`.  A peer that was not measured (no PyTorch on the
    machine) gives a row marked n/a, which counts neither way."""
    by_id = {r[0]: r for r in rows}
    peer_by_id = {p[0]: p for p in peers}
    out = []
    for ident, what, result_id, peer_id, goal in compares:
        lib = by_id.get(result_id)
        peer = peer_by_id.get(peer_id)
        if lib is None or peer is None or float(peer[2]) <= 0:
            out.append([ident, what, lib[2] if lib else "-", f"peer {peer_id}", "not measured",
                        lib[5] if lib else "-", "-", f"<= {goal}x peer", "n/a"])
            continue
        ratio = float(lib[2]) / float(peer[2])
        out.append([ident, what, lib[2], f"peer {peer_id}", peer[2], peer[3], f"{ratio:.3f}",
                    f"<= {goal}x peer", "yes" if ratio <= float(goal) else "NO"])
    return out


def main(path):
    info, rows, peers, compares = {}, [], [], []
    for line in open(path):
        parts = line.rstrip("\n").split("|")
        if parts[0] == "INFO" and len(parts) >= 3:
            info.setdefault(parts[1], parts[2])
        elif parts[0] == "RESULT" and len(parts) == 10:
            rows.append(parts[1:])
        elif parts[0] == "PEER" and len(parts) >= 4:
            peers.append(parts[1:])
        elif parts[0] == "COMPARE" and len(parts) == 6:
            compares.append(parts[1:])
    rows += compare_rows(compares, rows, peers)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = ["# Benchmarks", "",
           f"Measured {now} on {info.get('device', '?')}, driver {info.get('driver', '?')}, "
           "by `make bench` (tools/gpu/run-bench). Every row runs the library next to its raw "
           "equivalent in the same process, interleaved, medians of repeated loops; the ratio "
           "is library / baseline.", "",
           "| id | what | library | baseline | baseline value | unit | ratio | goal | met |",
           "| --- | --- | ---: | --- | ---: | --- | ---: | --- | --- |"]
    for r in rows:
        ident, what, lib, bname, base, unit, ratio, goal, met = r
        out.append(f"| {ident} | {what} | {lib} | {bname} | {base} | {unit} | {ratio} | {goal} | {met} |")
    if peers:
        out += ["", "## Peers measured in the same run", "",
                "| id | what | value | unit |", "| --- | --- | ---: | --- |"]
        for p in peers:
            out.append("| " + " | ".join(p[:4]) + " |")
    judged = [r for r in rows if r[8] != "n/a"]
    missed = [r[0] for r in judged if r[8] != "yes"]
    out += ["", f"Goals met: {len(judged) - len(missed)} of {len(judged)}" +
            (f"; missed: {', '.join(missed)}" if missed else "") + "."]
    sys.stdout.write(with_python_section("\n".join(out) + "\n"))


if __name__ == "__main__":
    if sys.argv[1] == "--python-section":
        with open(sys.argv[2]) as f:
            text = with_python_section(f.read(), sys.argv[3])
        with open(sys.argv[2], "w") as f:
            f.write(text)
    else:
        main(sys.argv[1])
