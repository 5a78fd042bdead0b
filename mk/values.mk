# SPDX-License-Identifier: MIT OR Apache-2.0
# The header's values against every place that quotes them, run by
# `make check`:
#
#   make check-values    tools/ci/check-values: every constant, default,
#                        limit and enum value of the header against the
#                        docs, the README and the bindings' constants, enums
#                        and comments, and every versioned struct's layout
#                        against its Rust, Python and Julia twins; first its
#                        self-test, which breaks copies of the tree and
#                        expects each break to be caught.

DEBS_CHECK += clang python3

.PHONY: check-values
check-values:
	@tools/build/ensure-debs clang python3
	@tools/ci/check-values --selftest
	@tools/ci/check-values

CHECK_TARGETS += check-values
