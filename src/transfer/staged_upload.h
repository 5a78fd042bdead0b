/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Bulk uploads from pageable memory through the slot's staging ring.
//
// The driver's own pageable path copies through a small internal buffer
// with one thread.  Here host threads copy step i into one page-locked
// buffer of the slot (in parallel pieces, so the reads of the source and
// any faults on never-touched source pages are spread over several cores)
// while the device copies step i - 1 out of another.  The call returns once
// the last step is queued: the source is then free, and the device reads
// only staging.
//
// INVARIANT: before the host writes a staging buffer it waits for the
// event recorded after the device copy that last read it (in this upload or
// an earlier one); downloads through the same ring are ordered after those
// copies by the stream.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "transfer/copy_pool.h"
#include "transfer/download_plan.h"
#include "runtime/call_frame.h"
#include "transfer/transfer_slot.h"

namespace tf {

// Pageable uploads up to this size use the driver's copy.
constexpr size_t kStagedUploadAbove = size_t(256) << 10;
// Steps are about sqrt(len * kUploadStepScale) bytes, at most one buffer
// (download_step_bytes).
constexpr size_t kUploadStepScale = size_t(1024) << 10;

struct UploadPlan {
    size_t step_scale = kUploadStepScale;
    size_t min_piece = kMinPiece;
    unsigned pieces_per_thread = kPiecesPerThread;
};

// Copies pageable [src, src + len) to device memory dst on the stream of
// `frame` (entered: the primary context current), taking the slot lock
// through the frame.
// On TF_OK the copies are queued and src is free.  On failure the ring is
// abandoned (leaked), dst holds nothing known, and no host thread reads src
// once this returns.  Thread cancellation is deferred until it returns.
tf_status upload_staged(CallFrame &frame, const void *src, uint64_t dst, size_t len);

// The pipeline under upload_staged for a plan of the caller's choosing
// (bench/tune_download), as run_download_plan.  The caller abandons the
// ring if this fails.
tf_status run_upload_plan(const DriverApi &api, CUstream stream, const StagingRing &ring,
                          CopyPool *pool, unsigned threads, const UploadPlan &plan, const void *src,
                          CUdeviceptr dst, size_t len);

}  // namespace tf
