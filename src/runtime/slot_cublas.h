/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The cuBLAS handle of one stream slot.
//
// INVARIANT: `handle` is either NULL or completely set up: created in the
// runtime's primary context, bound to the slot's stream (once, never
// rebound) and given the workspace below (when the runtime's
// cublas_workspace_bytes is nonzero).  A creation that fails half-way undoes
// what it did, so the next call starts over.  Guarded by the slot lock.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "driver/cublas_library.h"
#include "driver/driver_api.h"

namespace tf {

struct SlotCublas {
    cublasHandle_t handle = nullptr;
    CUdeviceptr workspace = 0;  // owned; 0 when none
};

// Creates the slot's handle bound to `stream` with `workspace_bytes` of
// workspace.  The primary context is current and the slot lock held.
tf_status create_slot_cublas(const DriverApi &driver, const CublasApi &cublas, CUstream stream,
                             uint64_t workspace_bytes, SlotCublas *out);

// Teardown: destroys the handle and frees the workspace.  The primary
// context is current and the slot's stream synchronized.  Failures are logged.
void release_slot_cublas(const DriverApi &driver, SlotCublas *slot);

}  // namespace tf
