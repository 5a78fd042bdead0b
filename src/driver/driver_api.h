/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The CUDA driver's function table, loaded at run time.
//
// Nothing links against libcuda: libcuda.so.1 is opened with dlopen and every
// entry point resolved once through cuGetProcAddress with the CUDA version
// whose prototype we call (driver/driver_entries.inc).  An entry point the driver
// does not provide stays NULL; the calls that need it fail with
// TF_ERROR_NOT_SUPPORTED and nothing else is affected.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "tenferro_gpu.h"

namespace tf {

struct DriverApi {
// The member is named after the entry point as cuda.h spells its current
// version (cuMemAlloc may expand to cuMemAlloc_v2); that is harmless because
// every use goes through the same macros.
#define TF_DRIVER_ENTRY(name, version) PFN_##name##_v##version name;
#include "driver/driver_entries.inc"
#undef TF_DRIVER_ENTRY
    int driver_version;
};

// Loads the driver once per process (later calls return the same result).
// Returns NULL after recording TF_ERROR_DRIVER_NOT_FOUND, _DRIVER_STUB or
// _DRIVER_TOO_OLD.  The driver stays loaded until the process exits.
const DriverApi *load_driver();

// load_driver, then cuInit.  cuInit is retried by later calls until it
// succeeds once.  Returns NULL after recording the failure.
const DriverApi *init_driver();

// Environment variable naming an absolute path to use instead of libcuda.so.1.
constexpr const char kDriverPathEnv[] = "TENFERRO_GPU_CUDA_DRIVER";

// The TENFERRO_GPU_CUDA_DRIVER path the driver was loaded from, or NULL when
// it was found as libcuda.so.1 (or is not loaded yet).  Other libraries
// (cuBLAS, NVRTC) find their own driver as libcuda.so.1, never through it.
const char *driver_override_path();

}  // namespace tf
