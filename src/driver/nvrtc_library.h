/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// NVRTC, loaded at first use: the function table and its failure messages.
//
// libnvrtc.so.13 is tried first, then libnvrtc.so.12 (or the absolute path
// in TENFERRO_GPU_NVRTC).  The result is kept for the life of the process.
#pragma once

#include <nvrtc.h>

#include "tenferro_gpu.h"

namespace tf {

struct NvrtcApi {
    decltype(&nvrtcGetErrorString) error_string;
    decltype(&nvrtcCreateProgram) create;
    decltype(&nvrtcDestroyProgram) destroy;
    decltype(&nvrtcCompileProgram) compile;
    decltype(&nvrtcGetProgramLogSize) log_size;
    decltype(&nvrtcGetProgramLog) log;
    decltype(&nvrtcGetPTXSize) ptx_size;
    decltype(&nvrtcGetPTX) ptx;
    decltype(&nvrtcGetCUBINSize) cubin_size;
    decltype(&nvrtcGetCUBIN) cubin;
};

constexpr const char kNvrtcPathEnv[] = "TENFERRO_GPU_NVRTC";

// The loaded table, or NULL after recording TF_ERROR_LIBRARY_NOT_FOUND or
// TF_ERROR_NOT_SUPPORTED.
const NvrtcApi *load_nvrtc();

// Whether load_nvrtc would succeed; records nothing.
bool nvrtc_loadable();

// Records "<operation>: NVRTC <call> failed: NVRTC_ERROR_X (n)" with code domain
// TF_CODE_NVRTC as `status` (TF_ERROR_PROVIDER unless the caller knows
// better).
// "NVRTC_ERROR_X", or "NVRTC result" when NVRTC cannot name it.
const char *nvrtc_result_name(const NvrtcApi &api, nvrtcResult r);

tf_status fail_nvrtc(const NvrtcApi &api, tf_status status, const char *call, nvrtcResult r)
    __attribute__((cold, noinline));

}  // namespace tf
