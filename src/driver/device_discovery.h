/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Device discovery: counting and describing devices without creating a context.
#pragma once

#include <cuda.h>

#include <string>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

// Number of devices; an initialised driver is required.
tf_status count_devices(const DriverApi &api, int32_t *out);

// Fills every field of `out` (struct_size included) for device `device` of
// ordinal `ordinal`; on failure `out` may be partly written.
tf_status describe_device(const DriverApi &api, int32_t ordinal, CUdevice device,
                          tf_device_properties *out);

// Looks `ordinal` up.  A negative ordinal is TF_ERROR_INVALID_ARGUMENT and an
// unknown one TF_ERROR_DEVICE_UNAVAILABLE, both with a message that lists the
// devices discovered.
tf_status lookup_device(const DriverApi &api, int32_t ordinal, CUdevice *out);

// "2 devices: 0 \"NVIDIA H200\" GPU-..., 1 ..." or why discovery failed.
// Leaves the thread's last error untouched.
std::string list_devices(const DriverApi &api);

}  // namespace tf
