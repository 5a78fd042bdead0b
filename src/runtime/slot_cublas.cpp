// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/slot_cublas.h"

#include "driver/cuda_status.h"
#include "util/log.h"

namespace tf {
namespace {

// Undoes a half-made handle; the failure that led here is what the caller
// reports, so failures of the cleanup itself only go to the log.
void discard(const DriverApi &driver, const CublasApi &cublas, cublasHandle_t h,
             CUdeviceptr workspace) {
    cublasStatus_t s = cublas.destroy(h);
    if (s != CUBLAS_STATUS_SUCCESS)
        log(TF_LOG_WARNING, "%s: cublasDestroy_v2 of a half-made handle returned %s (%d)",
            current_operation(), cublas_status_name(cublas, s), static_cast<int>(s));
    if (workspace == 0) return;
    CUresult r = driver.cuMemFree(workspace);
    if (r != CUDA_SUCCESS) {
        char what[96];
        log(TF_LOG_WARNING, "%s: cuMemFree of a half-made cuBLAS workspace returned %s",
            current_operation(), describe_cuda(driver, r, what, sizeof what));
    }
}

}  // namespace

tf_status create_slot_cublas(const DriverApi &driver, const CublasApi &cublas, CUstream stream,
                             uint64_t workspace_bytes, SlotCublas *out) {
    if (workspace_bytes > 0 && (!driver.cuMemAlloc || !driver.cuMemFree))
        return fail_missing(driver.cuMemAlloc ? "cuMemFree" : "cuMemAlloc");
    cublasHandle_t h = nullptr;
    cublasStatus_t s = cublas.create(&h);
    if (s != CUBLAS_STATUS_SUCCESS) return fail_cublas_create(cublas, s);
    // cuBLAS takes a runtime-API stream; a driver CUstream is the same object.
    s = cublas.set_stream(h, reinterpret_cast<cudaStream_t>(stream));
    if (s != CUBLAS_STATUS_SUCCESS) {
        tf_status st = fail_cublas(cublas, "cublasSetStream_v2", s);
        discard(driver, cublas, h, 0);
        return st;
    }
    CUdeviceptr workspace = 0;
    if (workspace_bytes > 0) {
        // Set after the stream: cublasSetStream resets the workspace.
        CUresult r = driver.cuMemAlloc(&workspace, static_cast<size_t>(workspace_bytes));
        if (r != CUDA_SUCCESS) {
            tf_status st = fail_cuda(driver, "cuMemAlloc", r);
            discard(driver, cublas, h, 0);
            return st;
        }
        s = cublas.set_workspace(h, reinterpret_cast<void *>(workspace),
                                 static_cast<size_t>(workspace_bytes));
        if (s != CUBLAS_STATUS_SUCCESS) {
            tf_status st = fail_cublas(cublas, "cublasSetWorkspace_v2", s);
            discard(driver, cublas, h, workspace);
            return st;
        }
    }
    out->handle = h;
    out->workspace = workspace;
    return TF_OK;
}

void release_slot_cublas(const DriverApi &driver, SlotCublas *slot) {
    // Under teardown's operation name (tf_runtime_release).
    if (slot->handle) {
        // The table is loaded: a handle exists only if loading succeeded.
        const CublasApi *cublas = load_cublas();
        cublasStatus_t s = cublas->destroy(slot->handle);
        if (s != CUBLAS_STATUS_SUCCESS)
            log(TF_LOG_WARNING, "%s: cublasDestroy_v2 failed: %s (%d)", current_operation(),
                cublas_status_name(*cublas, s), static_cast<int>(s));
        slot->handle = nullptr;
    }
    if (slot->workspace) {
        CUresult r = driver.cuMemFree(slot->workspace);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
            char what[96];
            log(TF_LOG_WARNING, "%s: cuMemFree of a cuBLAS workspace failed: %s",
                current_operation(), describe_cuda(driver, r, what, sizeof what));
        }
        slot->workspace = 0;
    }
}

}  // namespace tf
