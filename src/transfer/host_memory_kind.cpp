// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/host_memory_kind.h"

#include "driver/cuda_status.h"

namespace tf {

tf_status classify_host_memory(const DriverApi &api, const char *name, const void *p,
                               HostMemory *out) {
    if (!api.cuPointerGetAttribute) return fail_missing("cuPointerGetAttribute");
    const CUdeviceptr addr = reinterpret_cast<CUdeviceptr>(p);
    unsigned type = 0;
    CUresult r = api.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, addr);
    if (r == CUDA_ERROR_INVALID_VALUE) {  // the driver's answer for memory it does not know
        *out = HostMemory::pageable;
        return TF_OK;
    }
    if (r != CUDA_SUCCESS) return fail_cuda(api, "cuPointerGetAttribute", r);
    if (type == CU_MEMORYTYPE_DEVICE) {
        // Managed memory reports DEVICE too, and the host may use it.
        int managed = 0;
        r = api.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, addr);
        if (r != CUDA_SUCCESS) return fail_cuda(api, "cuPointerGetAttribute", r);
        if (!managed)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                           "%s %p is device memory; this call takes host memory (use tf_copy "
                           "between device addresses)",
                           name, p);
    }
    *out = HostMemory::page_locked;
    return TF_OK;
}

}  // namespace tf
