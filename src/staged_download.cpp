#include "staged_download.h"

#include <algorithm>
#include <cstring>

#include "cuda_status.h"
#include "transfer_options.h"

namespace tf {
namespace {

// Downloads shorter than four chunks are cut into four steps (of at least
// kMinStep) so that the device and the host threads still overlap.
constexpr size_t kMinStep = size_t(256) << 10;
// Host threads are not woken for less than this much each.
constexpr size_t kMinPiece = size_t(64) << 10;

size_t step_bytes(size_t len, size_t capacity) {
    if (len / 4 >= capacity) return capacity;
    size_t quarter = ((len + 3) / 4 + 4095) / 4096 * 4096;
    return std::min(capacity, std::max(quarter, std::min(kMinStep, capacity)));
}

class Pipeline {
public:
    Pipeline(const DriverApi &api, const char *op, CUstream stream, const StagingRing &ring,
             CopyPool *pool, unsigned threads)
        : api_(api), op_(op), stream_(stream), ring_(ring), pool_(pool), threads_(threads) {}

    tf_status run(CUdeviceptr src, char *dst, size_t len) {
        step_ = step_bytes(len, ring_.bytes);
        const size_t steps = (len + step_ - 1) / step_;
        tf_status st = issue(src, len, 0);
        if (st == TF_OK && steps > 1) st = issue(src, len, 1);
        for (size_t i = 0; st == TF_OK && i < steps; ++i) {
            const int b = static_cast<int>(i % StagingRing::kDepth);
            if ((st = TF_CU(api_, op_, cuEventSynchronize, ring_.landed[b])) != TF_OK) break;
            // The device now copies step i + 1 into the other buffer.
            const size_t off = i * step_;
            copy_out(dst + off, ring_.buffer[b], std::min(step_, len - off));
            if (i + StagingRing::kDepth < steps) st = issue(src, len, i + StagingRing::kDepth);
        }
        return st;
    }

private:
    // Queues the device copy of step i into its buffer and marks its landing.
    tf_status issue(CUdeviceptr src, size_t len, size_t i) {
        const int b = static_cast<int>(i % StagingRing::kDepth);
        const size_t off = i * step_;
        tf_status st = TF_CU(api_, op_, cuMemcpyDtoHAsync, ring_.buffer[b], src + off,
                             std::min(step_, len - off), stream_);
        return st == TF_OK ? TF_CU(api_, op_, cuEventRecord, ring_.landed[b], stream_) : st;
    }

    void copy_out(char *dst, const void *staged, size_t n) {
        const size_t ways = std::min<size_t>(threads_, std::max<size_t>(1, n / kMinPiece));
        if (pool_ && ways > 1)
            pool_->copy(dst, staged, n, static_cast<unsigned>(ways));
        else
            std::memcpy(dst, staged, n);
    }

    const DriverApi &api_;
    const char *op_;
    CUstream stream_;
    const StagingRing &ring_;
    CopyPool *pool_;
    unsigned threads_;
    size_t step_ = 0;
};

}  // namespace

tf_status download_staged(RuntimeState &state, const char *op, int slot, CUstream stream,
                          uint64_t src, void *dst, size_t len) {
    const unsigned threads = download_threads(state.options());
    // Started before anything is queued: it may throw std::bad_alloc.
    CopyPool *pool = threads > 1 ? &state.transfers().pool(threads, op) : nullptr;
    StreamSlot &s = state.slot(slot);
    SlotGuard guard;
    tf_status st = guard.acquire(s.lock, op, slot);
    if (st != TF_OK) return st;
    TransferSlot &staging = s.resources.transfer;
    st = ensure_staging_ring(state.api(), op, download_chunk_bytes(state.options()), staging);
    if (st != TF_OK) return st;
    Pipeline pipeline(state.api(), op, stream, staging.ring, pool, threads);
    st = pipeline.run(static_cast<CUdeviceptr>(src), static_cast<char *>(dst), len);
    // The device may still write a buffer whose copy or wait failed.
    if (st != TF_OK) abandon_staging_ring(staging);
    return st;
}

}  // namespace tf
