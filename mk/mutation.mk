# SPDX-License-Identifier: MIT OR Apache-2.0
# Mutation score of the suites (tools/test/mutation/, docs/testing.md section
# Mutation score): each planted bug of tools/test/mutation/mutations.json is built
# into a scratch copy of the library (build/mutation/) and the suites run
# against the driver double until one fails.  About 10 minutes on two cores;
# not part of `make check`.  Writes docs/mutation-report.txt.
#
#   make mutation                      the whole list
#   make mutation MUTATIONS=id,id      some mutations (no report file)
#   make mutation-check                every snippet found exactly once in src/
MUTATIONS ?=

.PHONY: mutation mutation-check
mutation: deps
	@tools/test/mutation/run $(if $(MUTATIONS),--only $(MUTATIONS))

mutation-check:
	@tools/test/mutation/run --check
