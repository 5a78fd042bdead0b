// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/cuda_status.h"

#include <cstdio>

namespace tf {

tf_status status_for_cuda(CUresult r) {
    switch (r) {
        case CUDA_SUCCESS: return TF_OK;
        case CUDA_ERROR_OUT_OF_MEMORY: return TF_ERROR_OUT_OF_MEMORY;
        case CUDA_ERROR_STUB_LIBRARY: return TF_ERROR_DRIVER_STUB;
        case CUDA_ERROR_NO_DEVICE: return TF_ERROR_NO_DEVICE;
        case CUDA_ERROR_INVALID_DEVICE: return TF_ERROR_DEVICE_UNAVAILABLE;
        case CUDA_ERROR_DEVICE_UNAVAILABLE: return TF_ERROR_DEVICE_UNAVAILABLE;
        case CUDA_ERROR_NOT_SUPPORTED: return TF_ERROR_NOT_SUPPORTED;
        // Sticky: the context cannot be used again; only releasing it helps.
        case CUDA_ERROR_ECC_UNCORRECTABLE:
        case CUDA_ERROR_ILLEGAL_ADDRESS:
        case CUDA_ERROR_LAUNCH_TIMEOUT:
        case CUDA_ERROR_ASSERT:
        case CUDA_ERROR_HARDWARE_STACK_ERROR:
        case CUDA_ERROR_ILLEGAL_INSTRUCTION:
        case CUDA_ERROR_MISALIGNED_ADDRESS:
        case CUDA_ERROR_INVALID_ADDRESS_SPACE:
        case CUDA_ERROR_INVALID_PC:
        case CUDA_ERROR_LAUNCH_FAILED: return TF_ERROR_DEVICE_FAULT;
        default: return TF_ERROR_CUDA;
    }
}

const char *describe_cuda(const DriverApi &api, CUresult r, char *buf, size_t cap) {
    const char *name = nullptr;
    if (!api.cuGetErrorName || api.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "CUDA error";
    std::snprintf(buf, cap, "%s (%d)", name, static_cast<int>(r));
    return buf;
}

tf_status fail_cuda(const DriverApi &api, const char *call, CUresult r) {
    return fail_cuda(api, call, r, nullptr);
}

tf_status fail_cuda(const DriverApi &api, const char *call, CUresult r, const char *consequence) {
    char what[96];
    describe_cuda(api, r, what, sizeof what);
    const char *text = nullptr;
    if (!api.cuGetErrorString || api.cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
        text = "no description";
    return fail(status_for_cuda(r), call, TF_CODE_CUDA, static_cast<int32_t>(r),
                "%s failed: %s: %s%s%s", call, what, text, consequence ? "; " : "",
                consequence ? consequence : "");
}

tf_status fail_missing(const char *call) {
    return fail(TF_ERROR_NOT_SUPPORTED, call, TF_CODE_NONE, 0,
                "the CUDA driver does not provide %s, which this call needs", call);
}

}  // namespace tf
