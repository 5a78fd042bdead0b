/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The names and texts of cublasStatus_t, shared by the cuBLAS and cuBLASLt
// doubles (cublasGetStatusName, cublasLtGetStatusName and their texts).
#pragma once

#include <cublas_api.h>

namespace tfd {

struct StatusText {
    int status;
    const char *name;
    const char *text;
};

inline const StatusText kStatus[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED",
     "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE",
     "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH",
     "an absent device architectural feature is required"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR",
     "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED",
     "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED",
     "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR",
     "the functionality requested requires some license"},
};

inline const StatusText *find_cublas_status(int s)
{
    for (const StatusText &t : kStatus)
        if (t.status == s)
            return &t;
    return nullptr;
}

}  // namespace tfd
