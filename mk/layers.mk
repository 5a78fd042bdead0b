# SPDX-License-Identifier: MIT OR Apache-2.0
# The layering of src/ (src/README.md): every source in a layer folder, no
# include of a layer above, src/api/ holding exported functions only.
#
#   make check-layers           tools/ci/check-layers, then its self-test
#                               (scratch copies of src/ broken on purpose)

DEBS_CHECK += python3

.PHONY: check-layers
check-layers:
	@tools/ci/check-layers
	@tools/ci/check-layers --selftest

CHECK_TARGETS += check-layers
