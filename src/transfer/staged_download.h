/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Bulk downloads into pageable memory through the slot's staging ring.
//
// The driver's own pageable path copies through a small internal buffer with
// one thread and faults the destination's pages in one at a time.  Here the
// device copies step i+1 into one page-locked buffer of the slot while host
// threads copy step i out of another, in parallel pieces, so page faults
// and memory bandwidth are spread over several cores.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "runtime/call_frame.h"
#include "transfer/copy_pool.h"
#include "transfer/download_plan.h"
#include "transfer/transfer_options.h"
#include "transfer/transfer_slot.h"
#include "util/defer_cancellation.h"

namespace tf {

// Pageable downloads up to this size use the driver's copy: staging would
// not pay for itself.
constexpr size_t kStagedDownloadAbove = size_t(64) << 10;

// What every staged transfer (download_staged, upload_staged) does around
// its pipeline: thread cancellation deferred until it returns (the copy
// jobs live in the caller's frame while the copy threads may hold them, and
// the ring must not be left to a dead transfer), the copy pool started
// before anything is queued (it may throw std::bad_alloc), the slot lock,
// the slot's ring of `depth` buffers; then run(ring, pool, threads).  A
// failure abandons the ring: the device may still use one of its buffers.
template <class Run>
tf_status run_staged(CallFrame &frame, int depth, Run &&run) {
    DeferCancellation no_cancel;
    RuntimeState &state = frame.state();
    const unsigned threads = download_threads(state.options());
    CopyPool *pool = threads > 1 ? &state.transfers().pool(threads) : nullptr;
    tf_status st = frame.lock_slot();
    if (st != TF_OK) return st;
    TransferSlot &staging = frame.resources().transfer;
    st = ensure_staging_ring(state.api(), download_chunk_bytes(state.options()), depth, staging);
    if (st != TF_OK) return st;
    st = run(staging.ring, pool, threads);
    if (st != TF_OK) abandon_staging_ring(staging);
    return st;
}

// Copies [src, src + len) into pageable `dst` on the stream of `frame`
// (entered: the primary context current), taking the slot lock.  On
// failure the ring is abandoned (leaked) and `dst` may be partly written;
// no host thread touches `dst` once this returns.  Thread cancellation is
// deferred until it returns.
tf_status download_staged(CallFrame &frame, uint64_t src, void *dst, size_t len);

// The pipeline under download_staged, for a plan of the caller's choosing
// (bench/tune_download): `ring` is allocated (its depth rules), `pool` is
// NULL or started, `threads` counts the caller, and the ring's events and
// `stream` belong to the current context.  The caller abandons the ring if
// this fails.
tf_status run_download_plan(const DriverApi &api, CUstream stream, const StagingRing &ring,
                            CopyPool *pool, unsigned threads, const DownloadPlan &plan,
                            CUdeviceptr src, void *dst, size_t len);

// Bytes per step of a len-byte download through buffers of `capacity` bytes
// (exposed for the tuning benchmark's report).
size_t download_step_bytes(size_t len, size_t capacity, size_t step_scale);

}  // namespace tf
