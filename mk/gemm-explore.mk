# SPDX-License-Identifier: MIT OR Apache-2.0
# Where a small GEMM's host time goes (issue 19, item 3; bench/explore_gemm.cpp).
#
#   make explore-gemm-smoke   bench/explore_gemm --smoke against the driver double
#                             and its cuBLAS and cuBLASLt: every variant runs and
#                             its product is checked
# The measurements are a GPU machine's: tools/gpu/gpu-explore-gemm.
.PHONY: explore-gemm-smoke
explore-gemm-smoke: $(BUILD)/bench/explore_gemm double
	LD_LIBRARY_PATH=$(DOUBLE_DIR) $(BUILD)/bench/explore_gemm --smoke > $(BUILD)/explore-gemm-smoke.log
	@echo "explore-gemm-smoke: $$(grep -c '^EXPLORE' $(BUILD)/explore-gemm-smoke.log) variants ran against the double"

CHECK_TARGETS += explore-gemm-smoke
