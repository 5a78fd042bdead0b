# SPDX-License-Identifier: MIT OR Apache-2.0
# Python binding (bindings/python/): pytest and mypy against the CUDA driver
# double, a wheel with the library inside, and the binding's per-call cost.
#
#   make check-python      the binding's tests (TF_TEST_MODE=double, the wheel
#                          installed and used with no library on the loader's
#                          path included), mypy --strict over the package and
#                          the examples, docs/python.md's copy of the example,
#                          docs/benchmarks.md's Python section
#   make python-wheel      build/python/tenferro_gpu-*.whl for PYTHON: the
#                          package with libtenferro_gpu.so.1 in
#                          tenferro_gpu/_lib/ (and the C extension, when PYTHON
#                          can build it); the output names the interpreter
#   make python-speedups   the optional C extension for PYTHON, in place (falls
#                          back to ctypes, with a line saying so, without
#                          Python.h)
#   make bench-python      what the binding adds to download_scalar, stream,
#                          sync and with_context, against the double; writes
#                          docs/benchmarks-python.md and its section of
#                          docs/benchmarks.md
#
# PYTHON (default: the python3 on PATH, so an active virtual environment's)
# is the interpreter the wheel and the C extension are built for.  The tests
# run with PYTEST_PYTHON (default /usr/bin/python3, for which Debian's
# python3-pytest installs pytest), and build them for it; without pytest (or
# mypy) there they skip with a line saying so.  The GPU tests (marked gpu) run only with
# TF_TEST_MODE=gpu on a GPU machine (docs/python.md says how).

DEBS_CI += python3-pytest python3-numpy mypy python3-dev
PYTHON ?= python3
PYTEST_PYTHON ?= /usr/bin/python3
PY_BINDING_DIR := bindings/python
PY_DOUBLE_ENV = TF_TEST_MODE=double PYTHONDONTWRITEBYTECODE=1 \
  LD_LIBRARY_PATH="$(abspath $(DOUBLE_DIR)):$(abspath $(BUILD)/lib)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}"
PY_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' $(PY_BINDING_DIR)/pyproject.toml)
PY_WHEEL_DIR := $(BUILD)/python
PY_SPEEDUPS_SRC := $(PY_BINDING_DIR)/src/_speedups.c
# The tests of the calls the C extension takes over, run once more without it.
PY_HOT_TESTS := test_runtime.py test_context.py test_memory.py test_leases.py test_stream.py \
  test_speedups.py test_views.py test_array_protocols.py test_blas_foreign.py
# ... and those of what the extension does that ctypes cannot (counted
# exports, the DLPack destructor), whose fallbacks differ.
PY_HOT_TESTS += test_blas.py test_graph.py
PY_HOT_TESTS += test_close_in_flight.py test_host_views.py test_exports.py \
  test_failed_copies.py test_teardown.py test_errors.py test_host.py

.PHONY: check-python python-wheel python-speedups bench-python check-python-types

# The C extension is optional: without the interpreter's headers the
# package uses ctypes alone, which `python-speedups` says.
python-speedups:
	@$(PYTHON) $(PY_BINDING_DIR)/tools/build_speedups.py $(PY_SPEEDUPS_SRC) \
	  $(PY_BINDING_DIR)/tenferro_gpu

python-wheel: lib python-speedups
	@$(PYTHON) -c 'import platform, sys; print("python-wheel: for", sys.executable, \
	  "(Python " + platform.python_version() + "; PYTHON=... names another)")'
	@rm -f $(PY_WHEEL_DIR)/tenferro_gpu-*.whl
	@$(PYTHON) $(PY_BINDING_DIR)/tools/build_wheel.py --package $(PY_BINDING_DIR) \
	  --library $(LIB) --licenses . --version $(PY_VERSION) --out $(PY_WHEEL_DIR)

# The suites and the benchmark use the wheel and the extension of their own
# interpreter.
check-python bench-python: PYTHON = $(PYTEST_PYTHON)

check-python: lib double python-wheel
	@if ! $(PYTEST_PYTHON) -c 'import pytest' 2>/dev/null; then \
	  echo "SKIPPED python binding tests: $(PYTEST_PYTHON) has no pytest (make deps installs python3-pytest)"; \
	  exit 0; \
	fi; \
	echo "python binding tests ($(PYTEST_PYTHON), against the driver double)"; \
	$(PY_DOUBLE_ENV) PY_WHEEL_DIR="$(abspath $(PY_WHEEL_DIR))" \
	  $(PYTEST_PYTHON) -m pytest -q -rs -p no:cacheprovider $(PY_BINDING_DIR)/tests && \
	echo "python binding tests of the hot calls again, ctypes only (TENFERRO_GPU_SPEEDUPS=0)" && \
	$(PY_DOUBLE_ENV) TENFERRO_GPU_SPEEDUPS=0 $(PYTEST_PYTHON) -m pytest -q -p no:cacheprovider \
	  $(addprefix $(PY_BINDING_DIR)/tests/,$(PY_HOT_TESTS))
	@$(MAKE) --no-print-directory check-python-types
	@tools/ci/check-doc-example docs/python.md $(PY_BINDING_DIR)/examples/hello.py
	@$(PYTEST_PYTHON) $(PY_BINDING_DIR)/tools/check_bench_section.py docs/benchmarks.md \
	  docs/benchmarks-python.md

check-python-types:
	@if ! $(PYTEST_PYTHON) -m mypy --version >/dev/null 2>&1; then \
	  echo "SKIPPED mypy --strict: $(PYTEST_PYTHON) has no mypy (make deps-ci installs it)"; \
	  exit 0; \
	fi; \
	echo "mypy --strict: the package and the examples"; \
	cd $(PY_BINDING_DIR) && $(PYTEST_PYTHON) -m mypy --strict --no-incremental \
	  --cache-dir=/dev/null tenferro_gpu examples

BENCH_PYTHON_HELPER := $(BUILD)/bench/libtf_python_overhead.so
$(BENCH_PYTHON_HELPER): bench/python_overhead.c include/tenferro_gpu.h $(LIB_LINKS) | $(BUILD)/bench
	$(CC) -std=c99 -O2 -fPIC -shared $(WARN) -Iinclude $(CPPFLAGS) $(CFLAGS) $< -o $@ \
	  -L$(BUILD)/lib $(LDFLAGS) -ltenferro_gpu

bench-python: lib double $(BENCH_PYTHON_HELPER) python-speedups
	@$(PY_DOUBLE_ENV) $(PYTEST_PYTHON) bench/python_overhead.py $(BENCH_PYTHON_HELPER) \
	  --markdown docs/benchmarks-python.md; st=$$?; \
	  python3 tools/gpu/bench_report.py --python-section docs/benchmarks.md docs/benchmarks-python.md; \
	  exit $$st

CI_TARGETS += check-python
