# SPDX-License-Identifier: MIT OR Apache-2.0
# Reliability gates: every resolved entry point has a test that injects its
# failure (tools/ci/fault-coverage).
.PHONY: fault-coverage
fault-coverage:
	@tools/ci/fault-coverage
CHECK_TARGETS += fault-coverage
