# SPDX-License-Identifier: MIT OR Apache-2.0
# A newcomer's first hour (tools/ci/check-newcomer), in `make ci`:
#
#   make check-newcomer   on a fresh clone of HEAD, offline, the routes the
#                         guides document, run as written (README.md,
#                         docs/getting-started.md, docs/python.md, docs/rust.md,
#                         docs/go.md: their blocks marked <!-- newcomer: ... -->):
#                         make install and install-double into a private
#                         $HOME, the README's program built with pkg-config and
#                         with CMake and run against the installed double, the
#                         wheel in a virtual environment of a Python other than
#                         /usr/bin/python3 and the PYTHONPATH route, a new cargo
#                         project, a new Go module; each must print what its
#                         guide shows.  A few minutes: it builds the library
#                         and the double once, in the clone.
#   make check-newcomer NEWCOMER_FLAGS=--worktree
#                         the same with the tracked files as the work tree
#                         holds them (a change not yet committed)
#
# cmake, cargo, go and another Python are used where they are installed;
# the blocks that need a missing one say SKIPPED and why.

NEWCOMER_FLAGS ?=

.PHONY: check-newcomer
check-newcomer:
	@tools/ci/check-newcomer $(NEWCOMER_FLAGS)

CI_TARGETS += check-newcomer
