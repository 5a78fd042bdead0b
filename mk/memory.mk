# SPDX-License-Identifier: MIT OR Apache-2.0
# The device memory pool (docs/memory.md).
#
#   make bench-memory-smoke   bench/bench_memory --smoke against the driver
#                             double: every row runs and its bytes are checked
#                             (the goals are judged on a GPU: make bench)
.PHONY: bench-memory-smoke
bench-memory-smoke: $(BUILD)/bench/bench_memory double
	LD_LIBRARY_PATH=$(DOUBLE_DIR) $(BUILD)/bench/bench_memory --smoke > $(BUILD)/bench-memory-smoke.log
	@echo "bench-memory-smoke: $$(grep -c '^RESULT' $(BUILD)/bench-memory-smoke.log) rows ran against the double"

CHECK_TARGETS += bench-memory-smoke
