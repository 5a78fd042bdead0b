/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The device allocations made through the library (tf_alloc), so that a
// transfer's address check answers them without a driver call.
//
// Every tf_alloc registers its range and every tf_free forgets it before
// the driver frees it; a runtime's teardown forgets what was allocated
// through it (its primary context may go with it, and the driver's address
// space with that).  A range not found here (foreign memory: PyTorch's,
// CuPy's, dev_alloc's in the tests, or a tf_alloc range of a runtime
// already torn down) is asked of the driver as before
// (transfer/device_range.cpp), so forgetting too much only costs time.
//
// Lookups are served first from a per-thread copy of the last range found
// (no lock, no atomic read-modify-write), valid while no range has been
// forgotten since (a process-wide count of removals); else under the
// registry's reader lock.  A range is only ever trusted while it is
// registered: a freed one is refused again, as the driver would.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tf {

struct KnownAllocation {
    uint64_t base = 0;
    size_t size = 0;
    int ordinal = -1;  // the device it lives on
};

// Records the live allocation [base, base + size) on device `ordinal`, made
// through the runtime of allocation domain `domain`.  Throws std::bad_alloc
// (the caller then frees the allocation).
void register_allocation(uint64_t base, size_t size, int ordinal, uint64_t domain);

// Forgets the allocation that starts at `base`, if registered (tf_free,
// before the driver frees it).
void forget_allocation(uint64_t base);

// Forgets every allocation made through the runtime of `domain` (its
// teardown).
void forget_domain(uint64_t domain);

// True, with *out, when `ptr` lies in a registered allocation.  Never
// blocks on a writer for longer than one update; allocates nothing.
bool find_allocation(uint64_t ptr, KnownAllocation *out);

}  // namespace tf
