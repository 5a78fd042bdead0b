# SPDX-License-Identifier: MIT OR Apache-2.0
# Page-locked host memory and asynchronous copies (docs/transfers.md).
#
#   make bench-host-smoke   bench/bench_host --smoke against the driver double:
#                           every row runs and its copies are byte-checked
#                           (the goals are judged on a GPU: make bench)
.PHONY: bench-host-smoke
bench-host-smoke: $(BUILD)/bench/bench_host double
	LD_LIBRARY_PATH=$(DOUBLE_DIR) $(BUILD)/bench/bench_host --smoke > $(BUILD)/bench-host-smoke.log
	@echo "bench-host-smoke: $$(grep -c '^RESULT' $(BUILD)/bench-host-smoke.log) rows ran against the double"

CHECK_TARGETS += bench-host-smoke
