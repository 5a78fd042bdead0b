/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The message of a device allocation that failed for want of memory, with
// the numbers a user needs to tell why (NOTE [device memory pool]).
#pragma once

#include <cstddef>
#include <cstdint>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

struct OutOfMemory {
    const char *call;         // the allocating driver call
    int ordinal;              // the device
    bool cached;              // from the library's pool, else cuMemAlloc
    size_t requested;         // bytes asked for
    uint64_t reserved;        // bytes the pool holds from the driver; UINT64_MAX: unknown
    uint64_t in_use;          // bytes of live tf_alloc allocations
    uint64_t reserved_limit;  // 0: none
};

// Records TF_ERROR_OUT_OF_MEMORY (code CUDA_ERROR_OUT_OF_MEMORY) with the
// request, the pool's reserved and in-use bytes, its limit, and the device's
// free and total memory (cuMemGetInfo; the primary context is current).
tf_status fail_out_of_device_memory(const DriverApi &api, const OutOfMemory &what)
    __attribute__((cold, noinline));

// "1.50 GiB" into buf.
const char *format_bytes(uint64_t bytes, char *buf, size_t cap);

}  // namespace tf
