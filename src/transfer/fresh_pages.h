/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Never-touched destinations of bulk downloads: telling them apart and
// faulting their pages in ahead of the copy.
//
// The first write to a page of fresh anonymous memory traps into the kernel,
// which allocates and zeroes the page.  MADV_POPULATE_WRITE (Linux 5.14)
// does the same for a whole range in one call, without a trap per page.  It
// never changes the contents of memory: pages already present stay as they
// are, and a page it faults in is exactly what the copy's first write would
// have faulted in (a zeroed page, or a private copy of a file page).  A
// mapping it cannot populate (device memory, a kernel without it) is left to
// the copy, which faults as it always would.
#pragma once

#include <cstddef>

namespace tf {

// Whether this kernel populates private anonymous memory on request (asked
// once per process, on first use, with a one-page probe mapping).
bool can_populate_pages();

// Whether the first whole page inside [p, p + n) looks never touched (not
// resident, by mincore).  False when the range holds no whole page or the
// kernel does not say.  One system call; the answer is only a hint.
bool looks_untouched(const void *p, size_t n);

// Faults in, writable, every page overlapping [p, p + n).  Failures are
// ignored: the copy that follows faults the pages as it would have anyway.
void populate_for_write(void *p, size_t n);

}  // namespace tf
