/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// tf_host_alloc blocks still held when their runtime's last reference went
// (NOTE [blocks outliving their runtime], src/README.md).
//
// The runtime's teardown hands them over, with the runtime's retain of the
// device's primary context: the end of that context would unmap them, so
// it lives until the last of them is freed with tf_host_free(NULL, ptr).
// The record is process-wide and never destroyed (nothing runs at exit: the
// driver may be gone by then); one mutex, re-initialised in a forked child,
// where the blocks are the parent's and every free is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "driver/driver_api.h"
#include "driver/primary_context.h"
#include "tenferro_gpu.h"

namespace tf {

struct OrphanBlock {
    uintptr_t base;
    size_t capacity;  // the size class the driver holds
};

// Takes over `blocks` and `retain` (the runtime's, so the context outlives
// them).  `idle`: teardown synchronized every stream of the runtime, so no
// copy can still use them and each is freed with cuMemFreeHost; otherwise
// a free only forgets the block, and the context's end frees it.  Logs one
// warning unless `quiet` (the driver is gone: process exit).  Never fails:
// without memory for the record the blocks and the retain are kept until
// the process exits.
void adopt_orphan_blocks(const DriverApi &api, PrimaryContextRetain retain, bool idle, bool quiet,
                         const std::vector<OrphanBlock> &blocks) noexcept;

// tf_host_free(NULL, ptr): frees the orphaned block that starts at ptr; the
// last block of a runtime releases its context retain.  TF_ERROR_INVALID_-
// ARGUMENT when ptr starts no such block; TF_ERROR_RUNTIME_STATE in a
// process forked from the one that allocated it; the device statuses of
// cuMemFreeHost (the block is forgotten all the same).
tf_status free_orphan_block(void *ptr);

// Whether ptr starts an orphaned block (for a message's hint).
bool is_orphan_block(const void *ptr);

}  // namespace tf
