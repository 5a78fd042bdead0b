// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/staged_download.h"

#include <algorithm>
#include <cmath>

#include "driver/cuda_status.h"
#include "transfer/fresh_pages.h"

namespace tf {
namespace {

// No step is smaller than this (the shortest staged download is longer).
constexpr size_t kMinStep = size_t(64) << 10;
constexpr size_t kStepAlign = 4096;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

class Pipeline {
public:
    Pipeline(const DriverApi &api, CUstream stream, const StagingRing &ring, CopyPool *pool,
             unsigned threads, const DownloadPlan &plan)
        : api_(api),
          stream_(stream),
          ring_(ring),
          pool_(pool && pool->workers() > 0 ? pool : nullptr),
          threads_(threads),
          plan_(plan),
          probe_fresh_(plan.populate_fresh && can_populate_pages()) {}

    tf_status run(CUdeviceptr src, char *dst, size_t len) {
        src_ = src;
        len_ = len;
        step_ = download_step_bytes(len, ring_.bytes, plan_.step_scale);
        steps_ = (len + step_ - 1) / step_;
        const size_t depth = static_cast<size_t>(ring_.depth);
        // The first device copy goes first; sleeping copy threads are woken
        // while it runs; then every other buffer is filled.
        tf_status st = issue(0);
        if (st == TF_OK && pool_) pool_->wake();
        for (size_t j = 1; st == TF_OK && j < std::min(depth, steps_); ++j) st = issue(j);
        for (size_t i = 0; st == TF_OK && i < steps_; ++i) st = step(i, dst);
        return st;
    }

private:
    // Waits for step i to land, copies it out, and queues a later step into
    // the buffer that became free.
    tf_status step(size_t i, char *dst) {
        const size_t depth = static_cast<size_t>(ring_.depth);
        const int b = static_cast<int>(i % depth);
        tf_status st = TF_CU(api_, cuEventSynchronize, ring_.landed[b]);
        if (st != TF_OK) return st;
        const size_t off = i * step_, n = std::min(step_, len_ - off);
        // A destination seen touched is not asked about again: one system
        // call per touched download, one per step of a fresh one.
        if (probe_fresh_) probe_fresh_ = looks_untouched(dst + off, n);
        CopyJob job(dst + off, ring_.buffer[b], n, pieces(n), probe_fresh_);
        if (pool_) pool_->post(job);
        // Step i - 1 is copied out: its buffer takes step i + depth - 1 while
        // the threads copy (the job is finished even if this fails: they
        // read the staging buffer and write dst).
        if (plan_.issue_after_post && i >= 1 && i + depth - 1 < steps_) st = issue(i + depth - 1);
        if (pool_)
            pool_->finish(job);
        else
            job.run_all();
        if (st == TF_OK && !plan_.issue_after_post && i + depth < steps_) st = issue(i + depth);
        return st;
    }

    // Queues the device copy of step i into its buffer and marks its landing.
    tf_status issue(size_t i) {
        const int b = static_cast<int>(i % static_cast<size_t>(ring_.depth));
        const size_t off = i * step_;
        tf_status st = TF_CU(api_, cuMemcpyDtoHAsync, ring_.buffer[b], src_ + off,
                             std::min(step_, len_ - off), stream_);
        return st == TF_OK ? TF_CU(api_, cuEventRecord, ring_.landed[b], stream_) : st;
    }

    // Pieces of an n-byte step: every thread busy if the step is long enough,
    // several pieces each to even out their speeds.
    unsigned pieces(size_t n) const {
        const size_t most = static_cast<size_t>(threads_) * std::max(1u, plan_.pieces_per_thread);
        const size_t fit = n / std::max<size_t>(plan_.min_piece, 1);
        return static_cast<unsigned>(std::max<size_t>(1, std::min(most, fit)));
    }

    const DriverApi &api_;
    CUstream stream_;
    const StagingRing &ring_;
    CopyPool *pool_;
    unsigned threads_;
    const DownloadPlan &plan_;
    bool probe_fresh_;  // populate steps that look untouched, until one does not
    CUdeviceptr src_ = 0;
    size_t len_ = 0, step_ = 0, steps_ = 0;
};

}  // namespace

size_t download_step_bytes(size_t len, size_t capacity, size_t step_scale) {
    // The first step's device copy is exposed, and each step costs a few
    // driver calls and a hand-off: sqrt(len * scale) balances the two.
    const double ideal = std::sqrt(static_cast<double>(len) * static_cast<double>(step_scale));
    size_t step = align_up(static_cast<size_t>(ideal), kStepAlign);
    step = std::min(capacity, std::max(step, std::min(kMinStep, capacity)));
    if (step >= len) return std::min(len, capacity);
    // Steps of equal length: no short last step that costs a whole step's
    // overhead.
    const size_t steps = (len + step - 1) / step;
    return std::min(capacity, align_up((len + steps - 1) / steps, kStepAlign));
}

tf_status run_download_plan(const DriverApi &api, CUstream stream, const StagingRing &ring,
                            CopyPool *pool, unsigned threads, const DownloadPlan &plan,
                            CUdeviceptr src, void *dst, size_t len) {
    Pipeline pipeline(api, stream, ring, pool, threads, plan);
    return pipeline.run(src, static_cast<char *>(dst), len);
}

tf_status download_staged(CallFrame &frame, uint64_t src, void *dst, size_t len) {
    const DownloadPlan plan;
    return run_staged(frame, plan.depth,
                      [&](const StagingRing &ring, CopyPool *pool, unsigned threads) {
                          return run_download_plan(frame.api(), frame.stream(), ring, pool, threads,
                                                   plan, static_cast<CUdeviceptr>(src), dst, len);
                      });
}

}  // namespace tf
