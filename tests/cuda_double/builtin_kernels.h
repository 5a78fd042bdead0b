// SPDX-License-Identifier: MIT OR Apache-2.0
// The double runs only its built-in kernels (module.cpp).  For any other
// kernel an image declares, cuModuleGetFunction returns
// CUDA_ERROR_NO_BINARY_FOR_GPU, whose description (cuGetErrorString,
// error_names.cpp) names the kernels it does run, so a program's error
// message says why its own kernel cannot run here.
#pragma once

namespace tfd {

// "no kernel image is available for execution on the device (the driver
// double runs only these kernels: tfd_fill_u32, ...)"; made once, never freed.
const char *no_binary_for_gpu_text();

}  // namespace tfd
