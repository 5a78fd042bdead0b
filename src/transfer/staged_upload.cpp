// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/staged_upload.h"

#include <algorithm>

#include "driver/cuda_status.h"
#include "transfer/staged_download.h"

namespace tf {
namespace {

unsigned pieces_for(size_t n, unsigned threads, const UploadPlan &plan) {
    const size_t most = static_cast<size_t>(threads) * std::max(1u, plan.pieces_per_thread);
    const size_t fit = n / std::max<size_t>(plan.min_piece, 1);
    return static_cast<unsigned>(std::max<size_t>(1, std::min(most, fit)));
}

}  // namespace

tf_status run_upload_plan(const DriverApi &api, CUstream stream, const StagingRing &ring,
                          CopyPool *pool, unsigned threads, const UploadPlan &plan, const void *src,
                          CUdeviceptr dst, size_t len) {
    if (pool && pool->workers() == 0) pool = nullptr;
    const char *from = static_cast<const char *>(src);
    const size_t step = download_step_bytes(len, ring.bytes, plan.step_scale);
    const size_t depth = static_cast<size_t>(ring.depth);
    // Sleeping copy threads wake while the first buffer is waited for.
    if (pool) pool->wake();
    for (size_t i = 0, off = 0; off < len; ++i, off += step) {
        const int b = static_cast<int>(i % depth);
        const size_t n = std::min(step, len - off);
        // The device has finished reading this buffer (a never-recorded
        // event is complete).
        tf_status st = TF_CU(api, cuEventSynchronize, ring.landed[b]);
        if (st != TF_OK) return st;
        CopyJob job(ring.buffer[b], from + off, n, pieces_for(n, threads, plan), false);
        if (pool) {
            pool->post(job);
            pool->finish(job);
        } else {
            job.run_all();
        }
        st = TF_CU(api, cuMemcpyHtoDAsync, dst + off, ring.buffer[b], n, stream);
        if (st == TF_OK) st = TF_CU(api, cuEventRecord, ring.landed[b], stream);
        if (st != TF_OK) return st;
    }
    return TF_OK;
}

tf_status upload_staged(CallFrame &frame, const void *src, uint64_t dst, size_t len) {
    return run_staged(
        frame, kStagingDepth, [&](const StagingRing &ring, CopyPool *pool, unsigned threads) {
            return run_upload_plan(frame.api(), frame.stream(), ring, pool, threads, UploadPlan(),
                                   src, static_cast<CUdeviceptr>(dst), len);
        });
}

}  // namespace tf
