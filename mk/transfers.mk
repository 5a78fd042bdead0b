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
	@$(PLOT_PYTHON) -c 'import matplotlib' 2>/dev/null || tools/ensure-debs python3-matplotlib
	$(PLOT_PYTHON) tools/plot_transfers.py $(or $(LOG),docs/benchmarks.log) docs/transfer-bandwidth.png

bench-transfer-sweep: bench-build
	$(BUILD)/bench/bench_transfer --sweep $(or $(SWEEP_MIB),256)
