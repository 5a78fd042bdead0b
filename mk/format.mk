# SPDX-License-Identifier: MIT OR Apache-2.0
# C and C++ formatting with clang-format 14 and the top-level .clang-format
# (tests/cuda_double/ refines it in its own):
#
#   make format          rewrite FORMAT_FILES in place
#   make format-check    list what `make format` would change; fails if anything
#
# FORMAT_FILES: src/ (every folder below it), tests/, bench/ and examples/.
# include/tenferro_gpu.h is left as written: its doc-comment layout is
# Doxygen's input, and tools/ci/test-abi-gate edits its exact lines.
# `make check` runs format-check: new code follows the same style.
CLANG_FORMAT ?= clang-format-14
FORMAT_FILES = $(sort $(shell find src tests bench examples -type f \
  \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.inc' \)))

.PHONY: format format-check
format:
	@tools/build/ensure-debs clang-format-14
	@$(CLANG_FORMAT) -i $(FORMAT_FILES)
	@echo "format: $(words $(FORMAT_FILES)) files formatted"

format-check:
	@tools/build/ensure-debs clang-format-14
	@changed=0; for f in $(FORMAT_FILES); do \
	  n=$$($(CLANG_FORMAT) "$$f" | diff -U0 "$$f" - | grep -c '^-[^-]'); \
	  if [ "$$n" -gt 0 ]; then echo "format-check: $$f: $$n lines would change"; changed=$$((changed + n)); fi; \
	done; \
	if [ "$$changed" -gt 0 ]; then echo "format-check: $$changed lines would change (make format)"; exit 1; fi; \
	echo "format-check: $(words $(FORMAT_FILES)) files formatted as .clang-format says"

CHECK_TARGETS += format-check
