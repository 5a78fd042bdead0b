# SPDX-License-Identifier: MIT OR Apache-2.0
# tools/ by purpose (tools/README.md, one line per tool), run by `make check`:
#
#   make check-tool-paths   every tools/ path the tree names exists, and
#                           tools/README.md lists every tool
#
# TOOL_PATHS_PENDING: FILE=PATH mentions in files another change owns, let
# through until it lands (the check fails once one matches nothing).
TOOL_PATHS_PENDING :=

DEBS_CHECK += python3

.PHONY: check-tool-paths
check-tool-paths:
	@tools/ci/check-tool-paths $(addprefix --pending ,$(TOOL_PATHS_PENDING))

CHECK_TARGETS += check-tool-paths
