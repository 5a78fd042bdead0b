// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/recorded_uses.h"

#include <algorithm>

#include "driver/cuda_status.h"
#include "runtime/runtime_state.h"
#include "util/log.h"

namespace tf {

void RecordedUses::add(uint64_t base, const RuntimeState *runtime, int slot) {
    std::lock_guard<std::mutex> hold(mutex_);
    std::vector<Use> &uses = uses_[base];
    for (const Use &u : uses)
        if (u.runtime == runtime && u.slot == slot) return;
    uses.push_back(Use{runtime, slot});
}

tf_status RecordedUses::wait_for(const DriverApi &api, CUstream use_stream, CUstream stream) {
    CUevent e = nullptr;
    if (!events_.empty()) {
        e = events_.back();
        events_.pop_back();
    } else {
        tf_status st = TF_CU(api, cuEventCreate, &e, CU_EVENT_DISABLE_TIMING);
        if (st != TF_OK) return st;
    }
    tf_status st = TF_CU(api, cuEventRecord, e, use_stream);
    if (st == TF_OK) st = TF_CU(api, cuStreamWaitEvent, stream, e, 0);
    // Reusable at once: the wait, if queued, saw this record.
    try {
        events_.push_back(e);
    } catch (...) {
        if (api.cuEventDestroy) api.cuEventDestroy(e);
    }
    return st;
}

tf_status RecordedUses::order_free(const DriverApi &api, const RuntimeState *freer, int slot,
                                   CUstream stream, uint64_t base) {
    std::lock_guard<std::mutex> hold(mutex_);
    auto it = uses_.find(base);
    if (it == uses_.end()) return TF_OK;
    for (const Use &u : it->second) {
        if (u.runtime == freer && u.slot == slot) continue;  // the stream's own order
        CUstream use_stream = u.runtime->existing_stream(u.slot);
        if (!use_stream || use_stream == stream) continue;
        tf_status st = wait_for(api, use_stream, stream);
        if (st != TF_OK) return st;
    }
    uses_.erase(it);
    return TF_OK;
}

void RecordedUses::forget(uint64_t base) {
    std::lock_guard<std::mutex> hold(mutex_);
    uses_.erase(base);
}

void RecordedUses::forget_runtime(const RuntimeState *runtime) {
    std::lock_guard<std::mutex> hold(mutex_);
    for (auto it = uses_.begin(); it != uses_.end();) {
        std::vector<Use> &uses = it->second;
        uses.erase(std::remove_if(uses.begin(), uses.end(),
                                  [&](const Use &u) { return u.runtime == runtime; }),
                   uses.end());
        it = uses.empty() ? uses_.erase(it) : std::next(it);
    }
}

void RecordedUses::release(const DriverApi &api) {
    std::lock_guard<std::mutex> hold(mutex_);
    for (CUevent e : events_) {
        CUresult r = api.cuEventDestroy ? api.cuEventDestroy(e) : CUDA_ERROR_NOT_FOUND;
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
            char what[96];
            log(TF_LOG_WARNING,
                "tf_runtime_release: cuEventDestroy of a recorded-use event failed: %s",
                describe_cuda(api, r, what, sizeof what));
        }
    }
    events_.clear();
    uses_.clear();
}

}  // namespace tf
