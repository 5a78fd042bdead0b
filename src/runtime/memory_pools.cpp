// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/memory_pools.h"

#include "driver/cuda_status.h"

namespace tf {

tf_status memory_pools_supported(const RuntimeState &state, bool *out) {
    std::atomic<int> &cached = state.transfers().memory_pools;
    int known = cached.load(std::memory_order_relaxed);
    if (known >= 0) {
        *out = known != 0;
        return TF_OK;
    }
    const DriverApi &api = state.api();
    int value = 0;
    if (api.cuMemAllocAsync && api.cuMemFreeAsync) {
        tf_status st = TF_CU(api, cuDeviceGetAttribute, &value,
                             CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, state.device());
        if (st != TF_OK) return st;
    }
    // Racing first callers store the same answer.
    cached.store(value != 0 ? 1 : 0, std::memory_order_relaxed);
    *out = value != 0;
    return TF_OK;
}

}  // namespace tf
