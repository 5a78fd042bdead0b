/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The process's device pools (runtime/device_pool.h): one per device, made
// with the first runtime of the device and destroyed with its last.
//
// A runtime acquires its device's pool at creation and releases it in its
// teardown.  The pool keeps the settings of the runtime that made it; a
// later runtime whose options set a different value fails at creation
// (NOTE [device memory pool]).  In a forked child the registry starts
// empty: the parent's pools are never touched there.
//
// Locking: one process-wide mutex around the table and the reference
// counts; the pool's destruction runs under it (no wait for the device).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "driver/driver_api.h"
#include "runtime/device_pool.h"
#include "tenferro_gpu.h"

namespace tf {

// The pool of device `ordinal` for a new runtime of identity `identity`
// with `settings`, whose nonzero fields were set explicitly (`explicit_*`):
// made if the device has none, else shared if the explicit fields agree.
// TF_ERROR_INVALID_ARGUMENT (naming both settings) otherwise.
struct PoolRequest {
    PoolSettings settings;
    bool explicit_threshold = false;
    bool explicit_limit = false;
};
tf_status acquire_device_pool(int ordinal, CUdevice device, const PoolRequest &request,
                              uint64_t identity, DevicePool **out);

// Drops a runtime's reference; the last one destroys the pool
// (DevicePool::release, in `context`, the device's primary context).
// After a sticky fault (`faulted`) the pool is still destroyed, which waits
// for nothing and needs no context, but its events are leaked with the
// context and no failure is logged.
void release_device_pool(const DriverApi &api, DevicePool *pool, bool faulted, CUcontext context);

}  // namespace tf
