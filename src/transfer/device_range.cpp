// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/device_range.h"

#include "driver/cuda_status.h"
#include "transfer/allocation_registry.h"

namespace tf {
namespace {

// What the driver knows about the allocation holding an address.
struct DeviceRange {
    uint64_t base = 0;
    size_t size = 0;
};

// The driver's answers for an address it does not know as device memory.
bool unknown_address(CUresult r) {
    return r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_INVALID_VALUE;
}

tf_status fail_not_found(const DriverApi &api, const char *name, uint64_t ptr, CUresult r)
    __attribute__((cold, noinline));
tf_status fail_not_found(const DriverApi &api, const char *name, uint64_t ptr, CUresult r) {
    char what[96];
    return fail(TF_ERROR_INVALID_ARGUMENT, "cuMemGetAddressRange", TF_CODE_CUDA,
                static_cast<int32_t>(r),
                "%s 0x%llx is not device memory (cuMemGetAddressRange answered %s)", name,
                static_cast<unsigned long long>(ptr), describe_cuda(api, r, what, sizeof what));
}

tf_status fail_past_end(const char *name, uint64_t ptr, size_t len, const DeviceRange &a)
    __attribute__((cold, noinline));
tf_status fail_past_end(const char *name, uint64_t ptr, size_t len, const DeviceRange &a) {
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                   "%s range 0x%llx + %zu bytes crosses the end of its allocation 0x%llx + %zu "
                   "bytes",
                   name, static_cast<unsigned long long>(ptr), len,
                   static_cast<unsigned long long>(a.base), a.size);
}

tf_status fail_other_device(const char *name, uint64_t ptr, int ordinal, int expected)
    __attribute__((cold, noinline));
tf_status fail_other_device(const char *name, uint64_t ptr, int ordinal, int expected) {
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                   "%s 0x%llx is memory of device %d; this runtime is on device %d", name,
                   static_cast<unsigned long long>(ptr), ordinal, expected);
}

// Whether an address could belong to another device: not when the process
// sees one device only, which saves the ordinal query on most machines.  A
// failed count is not cached and means "ask".
bool other_devices_possible(const RuntimeState &owner) {
    std::atomic<int> &cached = owner.transfers().device_count;
    int count = cached.load(std::memory_order_relaxed);
    if (count < 0) {
        const DriverApi &api = owner.api();
        if (!api.cuDeviceGetCount || api.cuDeviceGetCount(&count) != CUDA_SUCCESS) return true;
        cached.store(count, std::memory_order_relaxed);
    }
    return count != 1;
}

// The driver does not know `ptr` from the owner's context.  Where other
// devices exist that may be because it is their memory, which the driver
// finds only from their contexts: the ordinal, answered from any context,
// tells the two apart for the message.
tf_status fail_unknown(const RuntimeState &owner, const char *name, uint64_t ptr, CUresult r)
    __attribute__((cold, noinline));
tf_status fail_unknown(const RuntimeState &owner, const char *name, uint64_t ptr, CUresult r) {
    const DriverApi &api = owner.api();
    int ordinal = -1;
    if (other_devices_possible(owner) && api.cuPointerGetAttribute &&
        api.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                  static_cast<CUdeviceptr>(ptr)) == CUDA_SUCCESS &&
        ordinal >= 0 && ordinal != owner.info().ordinal)
        return fail_other_device(name, ptr, ordinal, owner.info().ordinal);
    return fail_not_found(api, name, ptr, r);
}

}  // namespace

tf_status check_device_range(const RuntimeState &owner, const char *name, uint64_t ptr,
                             size_t len) {
    // The library's own allocations: no driver call (transfer/allocation_registry.h).
    KnownAllocation known;
    if (owner.allocations().find(ptr, &known) || owner.allocations().find_elsewhere(ptr, &known)) {
        if (known.ordinal != owner.info().ordinal)
            return fail_other_device(name, ptr, known.ordinal, owner.info().ordinal);
        if (len > known.size - (ptr - known.base))
            return fail_past_end(name, ptr, len, DeviceRange{known.base, known.size});
        return TF_OK;
    }
    GraphAddress graph;
    if (owner.device_pool().graph_addresses().find(ptr, &graph)) {
        // Work queued into the capture that allocated it (NOTE [graph memory]).
        if (!graph.open)
            return fail_graph_address(name, ptr, "no work outside that graph can use it");
        if (len > graph.size - (ptr - graph.base))
            return fail_past_end(name, ptr, len, DeviceRange{graph.base, graph.size});
        return TF_OK;
    }
    return check_device_range_with_driver(owner, name, ptr, len);
}

tf_status check_device_range_with_driver(const RuntimeState &owner, const char *name, uint64_t ptr,
                                         size_t len) {
    const DriverApi &api = owner.api();
    if (!api.cuMemGetAddressRange) return fail_missing("cuMemGetAddressRange");
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = api.cuMemGetAddressRange(&base, &size, static_cast<CUdeviceptr>(ptr));
    if (r != CUDA_SUCCESS) {
        if (unknown_address(r)) return fail_unknown(owner, name, ptr, r);
        return fail_cuda(api, "cuMemGetAddressRange", r);
    }
    DeviceRange a;
    a.base = base;
    a.size = size;
    // ptr >= base is the driver's promise; written so that nothing overflows.
    if (ptr < a.base || ptr - a.base > a.size || len > a.size - (ptr - a.base))
        return fail_past_end(name, ptr, len, a);
    if (other_devices_possible(owner)) {
        if (!api.cuPointerGetAttribute) return fail_missing("cuPointerGetAttribute");
        int ordinal = -1;
        r = api.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      static_cast<CUdeviceptr>(ptr));
        if (r != CUDA_SUCCESS) return fail_cuda(api, "cuPointerGetAttribute", r);
        if (ordinal != owner.info().ordinal)
            return fail_other_device(name, ptr, ordinal, owner.info().ordinal);
    }
    return TF_OK;
}

tf_status check_no_overlap(uint64_t src, uint64_t dst, size_t len) {
    if ((src < dst ? dst - src : src - dst) >= len) return TF_OK;
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                   "src 0x%llx and dst 0x%llx overlap (%zu bytes each); the device copies "
                   "do not allow that",
                   static_cast<unsigned long long>(src), static_cast<unsigned long long>(dst), len);
}

}  // namespace tf
