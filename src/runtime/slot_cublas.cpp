// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/slot_cublas.h"

#include "driver/cuda_status.h"
#include "runtime/slot_cublaslt.h"
#include "util/log.h"

namespace tf {
namespace {

// Undoes a half-made handle; the failure that led here is what the caller
// reports, so failures of the cleanup itself only go to the log.
void discard(const CublasApi &cublas, cublasHandle_t h) {
    cublasStatus_t s = cublas.destroy(h);
    if (s != CUBLAS_STATUS_SUCCESS)
        log(TF_LOG_WARNING, "%s: cublasDestroy_v2 of a half-made handle returned %s (%d)",
            current_operation(), cublas_status_name(cublas, s), static_cast<int>(s));
}

}  // namespace

tf_status check_workspace_entries(const DriverApi &driver, uint64_t bytes) {
    if (bytes == 0 || (driver.cuMemAlloc && driver.cuMemFree)) return TF_OK;
    return fail_missing(driver.cuMemAlloc ? "cuMemFree" : "cuMemAlloc");
}

tf_status ensure_slot_workspace(const DriverApi &driver, uint64_t bytes, SlotCublas *slot,
                                bool *made) {
    *made = false;
    if (slot->workspace != 0 || bytes == 0) return TF_OK;
    CUdeviceptr workspace = 0;
    CUresult r = driver.cuMemAlloc(&workspace, static_cast<size_t>(bytes));
    if (r != CUDA_SUCCESS) return fail_cuda(driver, "cuMemAlloc", r);
    slot->workspace = workspace;
    slot->workspace_bytes = bytes;
    *made = true;
    return TF_OK;
}

void drop_new_workspace(const DriverApi &driver, bool made, SlotCublas *slot) {
    if (!made) return;
    CUresult r = driver.cuMemFree(slot->workspace);
    if (r != CUDA_SUCCESS) {
        char what[96];
        log(TF_LOG_WARNING, "%s: cuMemFree of a half-made cuBLAS workspace returned %s",
            current_operation(), describe_cuda(driver, r, what, sizeof what));
    }
    slot->workspace = 0;
    slot->workspace_bytes = 0;
}

tf_status create_slot_cublas(const DriverApi &driver, const CublasApi &cublas, CUstream stream,
                             uint64_t workspace_bytes, SlotCublas *out) {
    tf_status st = check_workspace_entries(driver, workspace_bytes);
    if (st != TF_OK) return st;
    cublasHandle_t h = nullptr;
    cublasStatus_t s = cublas.create(&h);
    if (s != CUBLAS_STATUS_SUCCESS) return fail_cublas_create(cublas, s);
    // cuBLAS takes a runtime-API stream; a driver CUstream is the same object.
    s = cublas.set_stream(h, reinterpret_cast<cudaStream_t>(stream));
    if (s != CUBLAS_STATUS_SUCCESS) {
        tf_status st = fail_cublas(cublas, "cublasSetStream_v2", s);
        discard(cublas, h);
        return st;
    }
    bool made = false;
    st = ensure_slot_workspace(driver, workspace_bytes, out, &made);
    if (st != TF_OK) {
        discard(cublas, h);
        return st;
    }
    if (out->workspace != 0) {
        // Set after the stream: cublasSetStream resets the workspace.
        s = cublas.set_workspace(h, reinterpret_cast<void *>(out->workspace),
                                 static_cast<size_t>(out->workspace_bytes));
        if (s != CUBLAS_STATUS_SUCCESS) {
            st = fail_cublas(cublas, "cublasSetWorkspace_v2", s);
            drop_new_workspace(driver, made, out);
            discard(cublas, h);
            return st;
        }
    }
    out->handle = h;
    return TF_OK;
}

void release_slot_cublas(const DriverApi &driver, SlotCublas *slot) {
    // Under teardown's operation name (tf_runtime_release).
    release_slot_cublaslt(slot);
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
        slot->workspace_bytes = 0;
    }
}

}  // namespace tf
