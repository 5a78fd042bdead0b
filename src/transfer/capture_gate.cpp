// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/capture_gate.h"

#include "driver/cuda_status.h"
#include "util/log.h"

namespace tf {

tf_status CaptureGate::mark(const DriverApi &api, CUstream stream, CUevent own, CUevent *used) {
    std::lock_guard<std::mutex> hold(gate_);
    if (capturing_.load(std::memory_order_relaxed)) {
        *used = fence_;
        return TF_OK;
    }
    tf_status st = TF_CU(api, cuEventRecord, own, stream);
    if (st == TF_OK) *used = own;
    return st;
}

tf_status CaptureGate::wait(const DriverApi &api, CUstream stream) {
    std::unique_lock<std::mutex> hold(gate_);
    // Under the gate: no capture begins while the stream is waited for.
    if (!capturing_.load(std::memory_order_relaxed)) return TF_CU(api, cuStreamSynchronize, stream);
    CUevent fence = fence_;  // recorded again only by a later begin(), which waits longer
    hold.unlock();
    return TF_CU(api, cuEventSynchronize, fence);
}

tf_status CaptureGate::record_fence(const DriverApi &api, CUstream stream) {
    if (!fence_) {
        tf_status st = TF_CU(api, cuEventCreate, &fence_, CU_EVENT_DISABLE_TIMING);
        if (st != TF_OK) return st;
    }
    return TF_CU(api, cuEventRecord, fence_, stream);
}

void CaptureGate::release(const DriverApi &api) {
    std::lock_guard<std::mutex> hold(gate_);
    if (!fence_) return;
    CUresult r = api.cuEventDestroy ? api.cuEventDestroy(fence_) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
        char what[96];
        log(TF_LOG_WARNING,
            "tf_runtime_release: cuEventDestroy of a slot's capture fence failed: %s",
            describe_cuda(api, r, what, sizeof what));
    }
    fence_ = nullptr;
}

}  // namespace tf
