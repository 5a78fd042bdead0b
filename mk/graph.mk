# SPDX-License-Identifier: MIT OR Apache-2.0
# Graph capture (docs/graphs.md).
#
#   make bench-graph-smoke   bench/bench_graph --smoke against the driver double:
#                            every row runs, and the four ways of running the CG
#                            iteration compute the same floats (the goals are
#                            judged on a GPU: make bench)
.PHONY: bench-graph-smoke
bench-graph-smoke: $(BUILD)/bench/bench_graph double
	LD_LIBRARY_PATH=$(DOUBLE_DIR) $(BUILD)/bench/bench_graph --smoke > $(BUILD)/bench-graph-smoke.log
	@echo "bench-graph-smoke: $$(grep -c '^RESULT' $(BUILD)/bench-graph-smoke.log) rows ran against the double, every way agreed"

CHECK_TARGETS += bench-graph-smoke
