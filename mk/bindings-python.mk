# Python binding (bindings/python/): pytest against the CUDA driver double.
#
#   make check-python      the binding's tests, TF_TEST_MODE=double
#
# The tests run with PYTEST_PYTHON (default /usr/bin/python3, for which
# Debian's python3-pytest installs pytest); without pytest there they skip
# with a line saying so.  The GPU tests (marked gpu) run only with
# TF_TEST_MODE=gpu on a GPU machine (docs/python.md says how).

DEBS_CI += python3-pytest python3-numpy
PYTEST_PYTHON ?= /usr/bin/python3
PY_BINDING_DIR := bindings/python

.PHONY: check-python
check-python: lib double
	@if ! $(PYTEST_PYTHON) -c 'import pytest' 2>/dev/null; then \
	  echo "SKIPPED python binding tests: $(PYTEST_PYTHON) has no pytest (make deps installs python3-pytest)"; \
	  exit 0; \
	fi; \
	echo "python binding tests ($(PYTEST_PYTHON), against the driver double)"; \
	TF_TEST_MODE=double PYTHONDONTWRITEBYTECODE=1 \
	LD_LIBRARY_PATH="$(abspath $(DOUBLE_DIR)):$(abspath $(BUILD)/lib)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}" \
	  $(PYTEST_PYTHON) -m pytest -q -rs -p no:cacheprovider $(PY_BINDING_DIR)/tests

CI_TARGETS += check-python
