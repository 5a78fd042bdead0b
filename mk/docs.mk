# SPDX-License-Identifier: MIT OR Apache-2.0
# The API reference and the guides (issue 6), run by `make ci`:
#
#   make docs    tools/ci/check-header-docs (every function's parameters with
#                their direction, statuses, thread safety, failure contract),
#                then Doxygen over the header and docs/*.md with warnings as
#                errors; HTML in $(BUILD)/docs/html/index.html.

DEBS_CI += doxygen clang python3

.PHONY: docs
docs:
	@tools/build/ensure-debs doxygen clang python3
	@tools/ci/check-header-docs include/tenferro_gpu.h
	@mkdir -p $(BUILD)/docs
	@( cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $(BUILD)/docs"; \
	   echo "PROJECT_NUMBER = $(VERSION)" ) | doxygen - 
	@echo "docs: $(BUILD)/docs/html/index.html (no Doxygen warning)"

CI_TARGETS += docs
