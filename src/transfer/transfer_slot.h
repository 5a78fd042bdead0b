/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Per-slot staging of the transfers: the scalar mailbox and the bulk ring.
//
// Both live in the slot's SlotResources and are guarded by the slot lock.
// They are page-locked with cuMemHostAlloc without WRITECOMBINED (the host
// reads them), allocated at the slot's first use and kept until teardown.
//
// INVARIANT: a buffer the device may still write after a failed copy or wait
// is abandoned: the slot forgets it (it is leaked, never freed or reused) and
// the next call allocates a fresh one.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"
#include "transfer/scalar_read.h"

namespace tf {

// `depth` buffers and the events that say a step has landed in each, for
// pipelined downloads into pageable memory.
struct StagingRing {
    static constexpr int kMaxDepth = 4;
    void *buffer[kMaxDepth] = {};
    CUevent landed[kMaxDepth] = {};
    size_t bytes = 0;  // capacity of each buffer; 0 while not allocated
    int depth = 0;     // buffers allocated, 2 .. kMaxDepth
};

struct TransferSlot {
    ScalarMailbox mailbox;  // tf_download_scalar (transfer/scalar_read.h)
    StagingRing ring;
    // Set by tf_graph_launch, without the slot lock: the launch queued work
    // the idle streak cannot see, so the next read asks the stream again
    // (NOTE [idle streak]).
    std::atomic<bool> graph_launched{false};
};

// Allocate what is missing.  The primary context is current and the slot
// lock held.  A failure frees whatever the call made (no copy used it yet).
// A ring that is already there is kept as it is, whatever bytes and depth
// (2 .. StagingRing::kMaxDepth) ask for.
tf_status ensure_staging_ring(const DriverApi &api, size_t bytes, int depth, TransferSlot &slot);

// Forget staging the device may still write (see the invariant above).
inline void abandon_staging_ring(TransferSlot &slot) { slot.ring = StagingRing(); }

// Teardown: every stream is synchronized and the primary context current.
// Failures are logged.
void release_transfer_slot(const DriverApi &api, TransferSlot &slot);

}  // namespace tf
