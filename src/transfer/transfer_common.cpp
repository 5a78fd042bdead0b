#include "transfer/transfer_common.h"

#include "driver/cuda_status.h"

namespace tf {

tf_status enter_slot_stream(const char *op, tf_runtime *rt, ContextScope &scope, int *slot,
                            CUstream *stream) {
    RuntimeState &state = *rt->state;
    tf_status st = scope.enter(state.api(), state.context(), op);
    if (st != TF_OK) return st;
    *slot = handle_slot(rt);
    return state.slot_stream(op, *slot, stream);
}

tf_status classify_host_memory(const DriverApi &api, const char *op, const char *name,
                               const void *p, HostMemory *out) {
    if (!api.cuPointerGetAttribute) return fail_missing(op, "cuPointerGetAttribute");
    const CUdeviceptr addr = reinterpret_cast<CUdeviceptr>(p);
    unsigned type = 0;
    CUresult r = api.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, addr);
    if (r == CUDA_ERROR_INVALID_VALUE) {  // the driver's answer for memory it does not know
        *out = HostMemory::pageable;
        return TF_OK;
    }
    if (r != CUDA_SUCCESS) return fail_cuda(api, op, "cuPointerGetAttribute", r);
    if (type == CU_MEMORYTYPE_DEVICE) {
        // Managed memory reports DEVICE too, and the host may use it.
        int managed = 0;
        r = api.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, addr);
        if (r != CUDA_SUCCESS) return fail_cuda(api, op, "cuPointerGetAttribute", r);
        if (!managed)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op,
                           "%s %p is device memory; this call takes host memory (use tf_copy "
                           "between device addresses)",
                           name, p);
    }
    *out = HostMemory::page_locked;
    return TF_OK;
}

tf_status HostTransfer::open(const char *op, tf_runtime *rt, const char *device_name,
                             uint64_t device, const char *host_name, const void *host,
                             size_t len) {
    const RuntimeState &state = *rt->state;
    tf_status st = enter_slot_stream(op, rt, scope, &slot, &stream);
    if (st == TF_OK) st = check_device_range(state, op, device_name, device, len);
    if (st == TF_OK) st = classify_host_memory(state.api(), op, host_name, host, &host_kind);
    return st;
}

tf_status check_no_overlap(const char *op, uint64_t src, uint64_t dst, size_t len) {
    if ((src < dst ? dst - src : src - dst) >= len) return TF_OK;
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op,
                   "src 0x%llx and dst 0x%llx overlap (%zu bytes each); the device copies "
                   "do not allow that",
                   static_cast<unsigned long long>(src), static_cast<unsigned long long>(dst),
                   len);
}

}  // namespace tf
