// SPDX-License-Identifier: MIT OR Apache-2.0
// The pages of page-locked host memory (cuMemHostAlloc blocks).
//
// Each block is a mapping of its own, so the double can take it away as the
// driver does: cuMemFreeHost unmaps it, and so does the end of the context
// that allocated it (a primary context whose retain count drops to 0, or a
// test context destroyed), PORTABLE or not, as on a GPU, where the reset of
// the context frees its cuMemHostAlloc memory.  A block that goes with its
// context stays reserved without access rights: a program still holding it
// faults at its next touch, and never reads a later block at that address.
#include "host_pages.h"

#include <sys/mman.h>
#include <unistd.h>

namespace tfd {
namespace {

size_t mapped_bytes(size_t bytes)
{
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
}

}  // namespace

void *map_host_block(size_t bytes)
{
    void *p = mmap(nullptr, mapped_bytes(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

void unmap_host_block(void *p, size_t bytes)
{
    munmap(p, mapped_bytes(bytes));
}

void reclaim_host_blocks(uint64_t ctx)
{
    State &s = state();
    for (auto it = s.host_allocs.begin(); it != s.host_allocs.end();) {
        if (it->second.ctx != ctx) {
            ++it;
            continue;
        }
        // The pages go, the addresses stay reserved and inaccessible.
        mmap(reinterpret_cast<void *>(it->first), mapped_bytes(it->second.size), PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        --s.live[TFD_HOST_ALLOCS];
        ++s.reclaimed[TFD_HOST_ALLOCS];
        it = s.host_allocs.erase(it);
    }
}

}  // namespace tfd
