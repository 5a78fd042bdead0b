// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/primary_context.h"

#include "driver/cuda_status.h"
#include "util/log.h"

namespace tf {

tf_status PrimaryContextRetain::retain(const DriverApi &api, CUdevice device) {
    CUcontext ctx = nullptr;
    tf_status st = TF_CU(api, cuDevicePrimaryCtxRetain, &ctx, device);
    if (st != TF_OK) return st;
    api_ = &api;
    device_ = device;
    context_ = ctx;
    held_ = true;
    return TF_OK;
}

void PrimaryContextRetain::release() {
    if (!held_) return;
    held_ = false;
    if (!api_->cuDevicePrimaryCtxRelease) {
        log(TF_LOG_WARNING,
            "cannot release the primary context of device %d: the driver lacks "
            "cuDevicePrimaryCtxRelease; it stays retained",
            static_cast<int>(device_));
        return;
    }
    CUresult r = api_->cuDevicePrimaryCtxRelease(device_);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_DEINITIALIZED) return;
    char what[96];
    log(TF_LOG_WARNING, "failed to release the primary context of device %d: %s",
        static_cast<int>(device_), describe_cuda(*api_, r, what, sizeof what));
}

}  // namespace tf
