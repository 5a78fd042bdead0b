/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The cuBLASLt handle of one stream slot (SlotCublas::lt_handle), made at the
// slot's first tf_cublaslt_enqueue with the slot's shared workspace.
#pragma once

#include "driver/cublaslt_library.h"
#include "runtime/slot_cublas.h"

namespace tf {

// Creates the slot's cuBLASLt handle, and the slot's workspace of
// `workspace_bytes` if it has none yet.  The primary context is current and
// the slot lock held.  On failure nothing this call made is left.
tf_status create_slot_cublaslt(const DriverApi &driver, const CublasLtApi &lt,
                               uint64_t workspace_bytes, SlotCublas *out);

// Teardown: destroys the cuBLASLt handle, if any; a failure is logged.
void release_slot_cublaslt(SlotCublas *slot);

}  // namespace tf
