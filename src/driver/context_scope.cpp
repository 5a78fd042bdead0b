// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/context_scope.h"

#include "driver/cuda_status.h"
#include "util/log.h"

namespace tf {

tf_status ContextScope::fail_missing_entry(const DriverApi &api) {
    return fail_missing(api.cuCtxGetCurrent ? "cuCtxSetCurrent" : "cuCtxGetCurrent");
}

tf_status ContextScope::fail_read(const DriverApi &api, CUresult r) {
    return fail_cuda(api, "cuCtxGetCurrent", r);
}

tf_status ContextScope::switch_from(const DriverApi &api, CUcontext current, CUcontext target) {
    CUresult r = api.cuCtxSetCurrent(target);
    if (r != CUDA_SUCCESS) {
        tf_status st = fail_cuda(api, "cuCtxSetCurrent", r);
        // The failed call may still have changed the current context; put
        // the caller's back unconditionally (asking first could fail too),
        // so a failure never leaves the thread elsewhere.
        CUresult back = api.cuCtxSetCurrent(current);
        if (back != CUDA_SUCCESS) {
            char what[96];
            log(TF_LOG_WARNING,
                "%s: failed to roll back a partial context activation: cuCtxSetCurrent "
                "returned %s",
                current_operation(), describe_cuda(api, back, what, sizeof what));
        }
        return st;
    }
    return TF_OK;
}

void ContextScope::restore(const DriverApi &api, CUcontext saved, bool quiet_when_deinitialized) {
    CUresult r = api.cuCtxSetCurrent(saved);
    if (r == CUDA_SUCCESS) return;
    // Teardown at process exit may find the driver already gone: nobody is
    // left to care, so it asks for quiet.
    if (r == CUDA_ERROR_DEINITIALIZED && quiet_when_deinitialized) return;
    char what[96];
    log(TF_LOG_WARNING,
        "%s: failed to restore the caller's CUDA context %p: cuCtxSetCurrent returned %s",
        current_operation(), static_cast<void *>(saved), describe_cuda(api, r, what, sizeof what));
}

}  // namespace tf
