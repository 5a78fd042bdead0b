/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The pages of cuMemHostAlloc blocks (host_pages.cpp).  The state mutex is
// held by every caller.
#ifndef TFD_HOST_PAGES_H
#define TFD_HOST_PAGES_H

#include <cstddef>
#include <cstdint>

#include "state.h"

namespace tfd {

// A page-aligned read-write mapping of at least `bytes`, or nullptr.
void *map_host_block(size_t bytes);
// cuMemFreeHost: the mapping goes (its addresses may be handed out again).
void unmap_host_block(void *p, size_t bytes);
// The end of context `ctx`: its blocks' pages go, their addresses stay
// reserved without access, and the blocks are counted as reclaimed.
void reclaim_host_blocks(uint64_t ctx);

}  // namespace tfd

#endif
