#!/usr/bin/env python3
"""Turns the RESULT/INFO/PEER lines the benchmarks print into markdown."""
import datetime
import sys


def main(path):
    info, rows, peers = {}, [], []
    for line in open(path):
        parts = line.rstrip("\n").split("|")
        if parts[0] == "INFO" and len(parts) >= 3:
            info.setdefault(parts[1], parts[2])
        elif parts[0] == "RESULT" and len(parts) == 10:
            rows.append(parts[1:])
        elif parts[0] == "PEER" and len(parts) >= 4:
            peers.append(parts[1:])
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = ["# Benchmarks", "",
           f"Measured {now} on {info.get('device', '?')}, driver {info.get('driver', '?')}, "
           "by `make bench` (tools/run-bench). Every row runs the library next to its raw "
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
    missed = [r[0] for r in rows if r[8] != "yes"]
    out += ["", f"Goals met: {len(rows) - len(missed)} of {len(rows)}" +
            (f"; missed: {', '.join(missed)}" if missed else "") + "."]
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
