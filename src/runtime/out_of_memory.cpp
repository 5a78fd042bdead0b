// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/out_of_memory.h"

#include <cstdio>

#include "driver/cuda_status.h"
#include "util/error.h"

namespace tf {

const char *format_bytes(uint64_t bytes, char *buf, size_t cap) {
    static const char *const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int unit = 0;
    while (v >= 1024.0 && unit < 4) {
        v /= 1024.0;
        ++unit;
    }
    if (unit == 0)
        std::snprintf(buf, cap, "%llu bytes", static_cast<unsigned long long>(bytes));
    else
        std::snprintf(buf, cap, "%.2f %s", v, kUnits[unit]);
    return buf;
}

tf_status fail_out_of_device_memory(const DriverApi &api, const OutOfMemory &w) {
    char asked[32], reserved[32], in_use[32], limit[48], free_s[32], total_s[32], device[96];
    size_t free_b = 0, total_b = 0;
    CUresult r = api.cuMemGetInfo ? api.cuMemGetInfo(&free_b, &total_b) : CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS) {
        std::snprintf(device, sizeof device, "%s free of %s (cuMemGetInfo)",
                      format_bytes(free_b, free_s, sizeof free_s),
                      format_bytes(total_b, total_s, sizeof total_s));
    } else {
        char why[64];
        std::snprintf(device, sizeof device, "free memory unknown (cuMemGetInfo: %s)",
                      describe_cuda(api, r, why, sizeof why));
    }
    char lim[32];
    if (w.reserved_limit == 0)
        std::snprintf(limit, sizeof limit, "none");
    else
        std::snprintf(limit, sizeof limit, "%s (memory_reserved_limit)",
                      format_bytes(w.reserved_limit, lim, sizeof lim));
    format_bytes(w.requested, asked, sizeof asked);
    format_bytes(w.in_use, in_use, sizeof in_use);
    if (!w.cached)
        return fail(TF_ERROR_OUT_OF_MEMORY, w.call, TF_CODE_CUDA, CUDA_ERROR_OUT_OF_MEMORY,
                    "out of device memory for %s (%zu bytes) on device %d: uncached (cuMemAlloc), "
                    "%s in live tf_alloc allocations; reserved limit %s; the device has %s",
                    asked, w.requested, w.ordinal, in_use, limit, device);
    if (w.reserved == UINT64_MAX)
        std::snprintf(reserved, sizeof reserved, "an unknown amount");
    else
        format_bytes(w.reserved, reserved, sizeof reserved);
    return fail(TF_ERROR_OUT_OF_MEMORY, w.call, TF_CODE_CUDA, CUDA_ERROR_OUT_OF_MEMORY,
                "out of device memory for %s (%zu bytes) on device %d: the library's pool holds "
                "%s reserved, %s of it in live tf_alloc allocations; reserved limit %s; the "
                "device has %s; cached memory was given back to the driver and the allocation "
                "tried once more",
                asked, w.requested, w.ordinal, reserved, in_use, limit, device);
}

}  // namespace tf
