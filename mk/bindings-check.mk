# SPDX-License-Identifier: MIT OR Apache-2.0
# One consistency check over every language binding: each public function
# of the header is bound (its name appears in a binding's non-test sources)
# or listed with a reason in bindings/<lang>/UNBOUND.txt.  A binding folder
# that does not exist yet is skipped with a line saying so.  A static check
# of the sources (a second or so): `make check` runs it; the bindings' own
# tests run in `make ci`.

DEBS_CHECK += python3

.PHONY: check-bindings
check-bindings:
	@tools/ci/check-bindings-selftest
	@tools/ci/check-bindings

CHECK_TARGETS += check-bindings
