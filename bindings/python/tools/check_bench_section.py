#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Checks that docs/benchmarks.md ends with the Python binding's overhead
section exactly as docs/benchmarks-python.md holds it (make bench-python
writes both; tools/gpu/bench_report.py keeps the section when the GPU rows
are regenerated).

    check_bench_section.py docs/benchmarks.md docs/benchmarks-python.md
"""

import sys


def main(report: str, section: str) -> int:
    with open(report) as f:
        text = f.read()
    with open(section) as f:
        wanted = f.read()
    if not text.endswith(wanted):
        print(f"check-bench-section: {report} does not end with {section}; run "
              f"`python3 tools/gpu/bench_report.py --python-section {report} {section}`")
        return 1
    print(f"check-bench-section: {report} ends with {section}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
