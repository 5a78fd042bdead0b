# SPDX-License-Identifier: MIT OR Apache-2.0
# Every tracked source file names its license (LICENSE: MIT OR Apache-2.0),
# run by `make check`:
#
#   make check-spdx    tools/ci/check-spdx, after its self-test

.PHONY: check-spdx
check-spdx:
	@tools/ci/check-spdx --selftest
	@tools/ci/check-spdx

CHECK_TARGETS += check-spdx
