# SPDX-License-Identifier: MIT OR Apache-2.0
# Issue 7.4: every bad input of every public function is documented and
# tested, run by `make check`:
#
#   make check-bad-input   tools/ci/check-bad-input: every public function of the
#                          header has a row in docs/bad-input.md, every cited
#                          test exists and is run, the cited suites call the
#                          function and assert the message fragment, and each
#                          status is one the header lists; first its self-test,
#                          which breaks copies of the table and expects each
#                          break to be caught.

DEBS_CHECK += clang python3

.PHONY: check-bad-input
check-bad-input:
	@tools/build/ensure-debs clang python3
	@tools/ci/check-bad-input --selftest
	@tools/ci/check-bad-input

CHECK_TARGETS += check-bad-input
