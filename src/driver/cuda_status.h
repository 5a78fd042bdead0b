/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// CUresult -> tf_status, and the message every failed driver call leaves.
#pragma once

#include <cuda.h>

#include "driver/driver_api.h"
#include "util/error.h"

namespace tf {

// The status a CUresult maps to.  Sticky device faults (illegal address,
// trap, launch failure, ...) map to TF_ERROR_DEVICE_FAULT.
tf_status status_for_cuda(CUresult r);

// Records "<operation>: <call> failed: CUDA_ERROR_X (n): description" and returns
// status_for_cuda(r).
tf_status fail_cuda(const DriverApi &api, const char *call, CUresult r)
    __attribute__((cold, noinline));
// The same, with "; <consequence>" appended to the message.
tf_status fail_cuda(const DriverApi &api, const char *call, CUresult r, const char *consequence)
    __attribute__((cold, noinline));

// Records that the driver lacks entry point `call`; TF_ERROR_NOT_SUPPORTED.
tf_status fail_missing(const char *call) __attribute__((cold, noinline));

// "CUDA_ERROR_X (n)" for log lines, into buf.
const char *describe_cuda(const DriverApi &api, CUresult r, char *buf, size_t cap);

inline tf_status check_cuda(const DriverApi &api, const char *call, CUresult r) {
    return r == CUDA_SUCCESS ? TF_OK : fail_cuda(api, call, r);
}

}  // namespace tf

// Calls driver entry point `entry` of DriverApi `api` and returns a status:
// TF_OK, the mapped failure, or TF_ERROR_NOT_SUPPORTED if the driver lacks it.
#define TF_CU(api, entry, ...)                                               \
    ((api).entry ? ::tf::check_cuda((api), #entry, (api).entry(__VA_ARGS__)) \
                 : ::tf::fail_missing(#entry))
