# Reliability gates: every resolved entry point has a test that injects its
# failure (tools/fault-coverage).
.PHONY: fault-coverage
fault-coverage:
	@tools/fault-coverage
CHECK_TARGETS += fault-coverage
