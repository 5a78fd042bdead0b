# SPDX-License-Identifier: MIT OR Apache-2.0
# The ABI gate (issue 6), run by `make check`:
#
#   make check-header    the header alone as C89/C99/C11 and C++98/11/17, gcc and clang
#   make check-layout    abi/layout.c: frozen struct layouts and enum values
#   make check-abi       abidiff of the built library against abi/tenferro_gpu.abixml
#   make check-abi-selftest  breaks a copy of the tree in each way the gate
#                        must catch and checks that it does
#   make abi-baseline    bump abi/ to the ABI as built now (the lead, on purpose;
#                        docs/abi-stability.md says when)
#
# The exported symbol list (abi/symbols.txt) is checked by check-static.

ABI_BASELINE := abi/tenferro_gpu.abixml
ABI_LAYOUT := abi/layout.c
ABI_WORK := $(BUILD)/abi
PUBLIC_HEADER := include/tenferro_gpu.h

DEBS_CHECK += abigail-tools clang python3

.PHONY: check-header check-layout check-abi check-abi-selftest abi-baseline

check-header:
	@tools/ci/check-header-compile $(PUBLIC_HEADER) $(BUILD)/header

check-layout:
	@tools/ci/abi-layout check $(PUBLIC_HEADER) $(ABI_LAYOUT)

check-abi: lib
	@tools/build/ensure-debs abigail-tools
	@tools/ci/abi-gate check $(LIB) $(ABI_BASELINE) $(ABI_WORK)

check-abi-selftest: lib
	@tools/ci/test-abi-gate "$(MAKE)" $(BUILD)/abi-selftest

# ABI_BREAK=1 lets an incompatible change through, only with a new SONAME.
# Both halves are validated before either file is written.
ABI_LAYOUT_FLAGS = $(if $(filter 1,$(ABI_BREAK)),--allow-break)
abi-baseline: lib
	@tools/build/ensure-debs abigail-tools clang python3
	@tools/ci/abi-layout plan $(PUBLIC_HEADER) $(ABI_LAYOUT) $(ABI_LAYOUT_FLAGS)
	@ABI_BREAK=$(ABI_BREAK) tools/ci/abi-gate bump $(LIB) $(ABI_BASELINE) $(ABI_WORK)
	@tools/ci/abi-layout bump $(PUBLIC_HEADER) $(ABI_LAYOUT) $(ABI_LAYOUT_FLAGS)
	@echo "abi-baseline: abi/ now describes version $(VERSION); commit abi/ with the change"

CHECK_TARGETS += check-header check-layout check-abi check-abi-selftest
