/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// cuBLASLt, loaded at first use: the function table the per-slot handles
// need, and the loaded file for tf_cublaslt_symbol.
//
// libcublasLt.so.13 is tried first, then libcublasLt.so.12 (or the absolute
// path in TENFERRO_GPU_CUBLASLT).  It is loaded on its own, not through
// cuBLAS: a program may use either without the other.  The result, success
// or failure, is kept for the life of the process.
#pragma once

#include <cublasLt.h>

#include "driver/cublas_library.h"
#include "tenferro_gpu.h"

namespace tf {

struct CublasLtApi {
    // Required: loading fails with TF_ERROR_NOT_SUPPORTED without them.
    decltype(&cublasLtCreate) create;
    decltype(&cublasLtDestroy) destroy;
    // Optional (cublasLtGetStatusName, cublasLtGetStatusString).
    BlasStatusText names;
    void *handle;  // the dlopen handle, for tf_cublaslt_symbol
};

constexpr const char kCublasLtPathEnv[] = "TENFERRO_GPU_CUBLASLT";

// The loaded table, or NULL after recording TF_ERROR_LIBRARY_NOT_FOUND,
// TF_ERROR_NOT_SUPPORTED or (a fork lost the load) TF_ERROR_RUNTIME_STATE.
const CublasLtApi *load_cublaslt();

}  // namespace tf
