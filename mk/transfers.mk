# SPDX-License-Identifier: MIT OR Apache-2.0
# Transfers: the download bandwidth plot and the sweep of the download options.
#
#   make plot-transfers [LOG=docs/benchmarks.log]   docs/transfer-bandwidth.png
#   make bench-transfer-sweep [SWEEP_MIB=256]       GPU machine: SWEEP lines
#
# The plot needs matplotlib: Debian's python3-matplotlib (installed when
# missing) serves when the python3 on PATH has none.
PLOT_PYTHON ?= $(firstword $(foreach p,python3 /usr/bin/python3,\
  $(shell $(p) -c 'import matplotlib' >/dev/null 2>&1 && echo $(p))) /usr/bin/python3)

.PHONY: plot-transfers bench-transfer-sweep
plot-transfers:
	@$(PLOT_PYTHON) -c 'import matplotlib' 2>/dev/null || tools/build/ensure-debs python3-matplotlib
	$(PLOT_PYTHON) tools/tuning/plot_transfers.py $(or $(LOG),docs/benchmarks.log) docs/transfer-bandwidth.png

bench-transfer-sweep: bench-build
	$(BUILD)/bench/bench_transfer --sweep $(or $(SWEEP_MIB),256)

# ---- tuning the pageable download path (docs/transfers.md, "Tuning") ----------
#
#   make tune-download [TUNE_LOG=tune.log]   GPU machine: the sweep, then the pick
#   make tune-download-smoke                 the sweep's smoke run on the double
#
# bench/tune_download links the library's objects rather than the shared
# library: the plan it sweeps (src/transfer/download_plan.h) is internal.
TUNE_DOWNLOAD := $(BUILD)/bench/tune_download
$(TUNE_DOWNLOAD): bench/tune_download.cpp bench/bench_util.h $(LIB_OBJS) | $(BUILD)/bench
	$(CXX) $(BENCH_CXXFLAGS) -Isrc $(CPPFLAGS) $(CXXFLAGS) $< $(LIB_OBJS) -o $@ $(LDFLAGS) -ldl -lpthread

.PHONY: tune-download tune-download-smoke
tune-download: $(TUNE_DOWNLOAD)
	$(TUNE_DOWNLOAD) | tee $(or $(TUNE_LOG),tune.log)
	python3 tools/tuning/pick_download_defaults.py $(or $(TUNE_LOG),tune.log)

# Every branch of the pipeline through the sweep's own byte checks, and the
# pick script over its log.
tune-download-smoke: $(TUNE_DOWNLOAD) double
	LD_LIBRARY_PATH=$(DOUBLE_DIR) $(TUNE_DOWNLOAD) --smoke > $(BUILD)/tune-smoke.log
	python3 tools/tuning/pick_download_defaults.py --smoke $(BUILD)/tune-smoke.log > $(BUILD)/tune-smoke.pick
	@echo "tune-download-smoke: $$(grep -c '^TUNE' $(BUILD)/tune-smoke.log) measurements, every plan byte-checked"
CHECK_TARGETS += tune-download-smoke

# ---- tuning tf_download_scalar (docs/transfers.md, "Scalar reads") ---------------
#
#   make tune-scalar [TUNE_SCALAR_LOG=tune-scalar.log]   GPU machine: sweep, then pick
#   make tune-scalar-smoke                               every plan on the double
#
# bench/tune_scalar links the library's objects, as tune_download does: the
# read plan (src/transfer/scalar_read.h) and the address check are internal.
TUNE_SCALAR := $(BUILD)/bench/tune_scalar
$(TUNE_SCALAR): bench/tune_scalar.cpp bench/bench_util.h $(LIB_OBJS) | $(BUILD)/bench
	$(CXX) $(BENCH_CXXFLAGS) -Isrc $(CPPFLAGS) $(CXXFLAGS) $< $(LIB_OBJS) -o $@ $(LDFLAGS) -ldl -lpthread

.PHONY: tune-scalar tune-scalar-smoke
tune-scalar: $(TUNE_SCALAR)
	$(TUNE_SCALAR) | tee $(or $(TUNE_SCALAR_LOG),tune-scalar.log)
	python3 tools/tuning/pick_scalar_plan.py $(or $(TUNE_SCALAR_LOG),tune-scalar.log)

tune-scalar-smoke: $(TUNE_SCALAR) double
	LD_LIBRARY_PATH=$(DOUBLE_DIR) $(TUNE_SCALAR) --smoke > $(BUILD)/tune-scalar-smoke.log
	python3 tools/tuning/pick_scalar_plan.py --smoke $(BUILD)/tune-scalar-smoke.log > $(BUILD)/tune-scalar-smoke.pick
	@echo "tune-scalar-smoke: $$(grep -c '^PLAN' $(BUILD)/tune-scalar-smoke.log) plan measurements, every read checked"
CHECK_TARGETS += tune-scalar-smoke
