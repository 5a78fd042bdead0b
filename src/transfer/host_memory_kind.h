/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What kind of host memory a caller's pointer is.
#pragma once

#include "driver/driver_api.h"

namespace tf {

enum class HostMemory {
    pageable,     // unknown to CUDA: ordinary memory
    page_locked,  // allocated or registered with CUDA, or managed: the device can reach it
};

// What kind of host memory `p` is (one cuPointerGetAttribute).  Device
// memory (not managed) is TF_ERROR_INVALID_ARGUMENT naming `name`.  A context
// must be current.
tf_status classify_host_memory(const DriverApi &api, const char *name, const void *p,
                               HostMemory *out);

}  // namespace tf
