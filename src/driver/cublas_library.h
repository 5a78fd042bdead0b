/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// cuBLAS, loaded at first use: the function table and its failure messages.
//
// libcublas.so.13 is tried first, then libcublas.so.12 (or the absolute path
// in TENFERRO_GPU_CUBLAS).  The result, success or failure, is kept for the
// life of the process.
#pragma once

#include <cublas_api.h>

#include "tenferro_gpu.h"

namespace tf {

// What names a cublasStatus_t: cuBLAS's and cuBLASLt's functions have the
// same type; either may be NULL (messages then give the bare number).
struct BlasStatusText {
    decltype(&cublasGetStatusName) name;
    decltype(&cublasGetStatusString) text;
};

struct CublasApi {
    // Required: loading fails with TF_ERROR_NOT_SUPPORTED without them.
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    decltype(&cublasSetPointerMode_v2) set_pointer_mode;
    decltype(&cublasGetProperty) get_property;
    // Optional (cublasGetStatusName, cublasGetStatusString).
    BlasStatusText names;
    void *handle;  // the dlopen handle, for tf_cublas_symbol
};

constexpr const char kCublasPathEnv[] = "TENFERRO_GPU_CUBLAS";

// The loaded table, or NULL after recording TF_ERROR_LIBRARY_NOT_FOUND or
// TF_ERROR_NOT_SUPPORTED.
const CublasApi *load_cublas();

// Whether load_cublas would succeed; records nothing.
bool cublas_loadable();

// "CUBLAS_STATUS_X", or "cuBLAS status" when the library cannot name it.
const char *cublas_status_name(const BlasStatusText &names, int32_t status);
inline const char *cublas_status_name(const CublasApi &api, int32_t status) {
    return cublas_status_name(api.names, status);
}

// Records "<operation>: cuBLAS <call> failed: CUBLAS_STATUS_X (n): text" as
// TF_ERROR_PROVIDER with code domain TF_CODE_CUBLAS (`names` of cuBLAS or
// cuBLASLt, which share the status codes).
tf_status fail_cublas(const BlasStatusText &names, const char *call, int32_t status)
    __attribute__((cold, noinline));
inline tf_status fail_cublas(const CublasApi &api, const char *call, int32_t status) {
    return fail_cublas(api.names, call, status);
}

// fail_cublas for cublasCreate_v2, naming the cuBLAS file: a cuBLAS that
// cannot work with the loaded driver fails there.
tf_status fail_cublas_create(const CublasApi &api, int32_t status) __attribute__((cold, noinline));

}  // namespace tf
