# SPDX-License-Identifier: MIT OR Apache-2.0
# Small GEMMs through tf_cublaslt_enqueue (issue 19, item 3; bench/bench_cublaslt.cpp).
#
#   make bench-cublaslt-smoke   bench/bench_cublaslt --smoke against the driver
#                               double and its cuBLAS and cuBLASLt: every
#                               variant's product is checked, every row printed
# The measurements are a GPU machine's: `make bench` (tools/gpu/run-bench).
.PHONY: bench-cublaslt-smoke
bench-cublaslt-smoke: $(BUILD)/bench/bench_cublaslt double
	LD_LIBRARY_PATH=$(DOUBLE_DIR) $(BUILD)/bench/bench_cublaslt --smoke > $(BUILD)/bench-cublaslt-smoke.log
	@test "$$(grep -c '^RESULT|lt_sgemm8' $(BUILD)/bench-cublaslt-smoke.log)" = 4
	@echo "bench-cublaslt-smoke: 4 rows against the double, every product checked"

CHECK_TARGETS += bench-cublaslt-smoke
