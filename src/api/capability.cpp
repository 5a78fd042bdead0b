// SPDX-License-Identifier: MIT OR Apache-2.0
// tf_runtime_supports: which capabilities this runtime offers.
#include "api/guard.h"
#include "driver/cublas_library.h"
#include "driver/nvrtc_library.h"
#include "runtime/device_pool.h"

namespace {

bool supports(const tf::RuntimeState &state, int32_t capability) {
    const tf::DriverApi &api = state.api();
    switch (capability) {
        case TF_CAP_NATIVE_MODULES:
            return api.cuModuleLoadDataEx && api.cuModuleGetFunction && api.cuLaunchKernel &&
                   api.cuModuleUnload;
        // Probing loads the library (once per process), as its first use would.
        case TF_CAP_CUBLAS: return tf::cublas_loadable();
        case TF_CAP_RUNTIME_COMPILATION: return tf::nvrtc_loadable();
        case TF_CAP_RAW_STREAM: return api.cuStreamCreate != nullptr;
        case TF_CAP_SAME_DEVICE_COPY: return api.cuMemcpyDtoDAsync != nullptr;
        // Depends on the pair of devices: asked per pair, never here.
        case TF_CAP_PEER_COPY: return false;
        case TF_CAP_STREAM_ORDERED_ALLOC: {
            // A failed query answers "no", and is not this call's failure.
            tf::KeepLastError keep;
            bool pools = false;
            return tf::memory_pools_supported(state, &pools) == TF_OK && pools;
        }
        default: return false;  // unknown to this version: not supported
    }
}

}  // namespace

extern "C" TF_API tf_status tf_runtime_supports(const tf_runtime *rt, int32_t capability,
                                                int32_t *out_supported) {
    static const char op[] = "tf_runtime_supports";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out_supported) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_supported is NULL");
        *out_supported = supports(state, capability) ? 1 : 0;
        return TF_OK;
    });
}
