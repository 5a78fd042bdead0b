/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The cuBLAS and cuBLASLt handles of one stream slot, and the workspace
// they share.
//
// INVARIANT: `handle` is either NULL or completely set up: created in the
// runtime's primary context, bound to the slot's stream (once, never
// rebound) and given the workspace below (when the runtime's
// cublas_workspace_bytes is nonzero).  `lt_handle` is NULL or created in
// that context (cuBLASLt takes the stream and workspace at each matmul).
// A creation that fails half-way undoes what it did, the workspace
// included when that creation allocated it, so the next call starts over.
// Guarded by the slot lock.
//
// One workspace serves both handles: everything that uses it is queued on
// the slot's one stream, which runs it in order, so no two kernels use it at
// once (the same reason one cuBLAS handle reuses its workspace call after
// call).
#pragma once

#include <cublasLt.h>
#include <cuda.h>

#include <cstdint>

#include "driver/cublas_library.h"
#include "driver/driver_api.h"

namespace tf {

struct SlotCublas {
    cublasHandle_t handle = nullptr;       // tf_cublas_enqueue
    cublasLtHandle_t lt_handle = nullptr;  // tf_cublaslt_enqueue (runtime/slot_cublaslt.h)
    CUdeviceptr workspace = 0;             // owned; 0 when none
    uint64_t workspace_bytes = 0;          // its size
};

// Creates the slot's handle bound to `stream` with the slot's workspace
// (allocated now, of `workspace_bytes`, if the slot has none yet).  The
// primary context is current and the slot lock held.
tf_status create_slot_cublas(const DriverApi &driver, const CublasApi &cublas, CUstream stream,
                             uint64_t workspace_bytes, SlotCublas *out);

// TF_ERROR_NOT_SUPPORTED when a workspace of `bytes` is asked for and the
// driver lacks cuMemAlloc or cuMemFree: checked before anything is made.
tf_status check_workspace_entries(const DriverApi &driver, uint64_t bytes);

// Allocates the slot's workspace of `bytes` unless it has one or `bytes` is
// 0; *made says whether this call allocated it.  Context current, slot lock
// held, check_workspace_entries() passed.
tf_status ensure_slot_workspace(const DriverApi &driver, uint64_t bytes, SlotCublas *slot,
                                bool *made);

// Frees the workspace a failed creation allocated (made), logging a
// failure of the free: the failure that led here is what the caller reports.
void drop_new_workspace(const DriverApi &driver, bool made, SlotCublas *slot);

// Teardown: destroys both handles and frees the workspace.  The primary
// context is current and the slot's stream synchronized.  Failures are logged.
void release_slot_cublas(const DriverApi &driver, SlotCublas *slot);

}  // namespace tf
