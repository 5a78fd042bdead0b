/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Ownership of one retain of a device's primary context.
#pragma once

#include <cuda.h>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

class PrimaryContextRetain {
public:
    PrimaryContextRetain() = default;
    ~PrimaryContextRetain() { release(); }
    PrimaryContextRetain(const PrimaryContextRetain &) = delete;
    PrimaryContextRetain &operator=(const PrimaryContextRetain &) = delete;
    // Takes over `other`'s retain (other then holds none): the retain
    // changes owner without a driver call.
    PrimaryContextRetain(PrimaryContextRetain &&other) noexcept
        : api_(other.api_), device_(other.device_), context_(other.context_), held_(other.held_) {
        other.held_ = false;
    }
    PrimaryContextRetain &operator=(PrimaryContextRetain &&) = delete;

    // Retains the primary context of `device`.
    tf_status retain(const DriverApi &api, CUdevice device);

    // Drops the retain now; a failure is logged (quietly skipped when the
    // driver is already deinitialized).  Idempotent.
    void release();
    // Forgets the retain without a driver call (forked child: the context
    // belongs to the parent).
    void abandon() { held_ = false; }

    CUcontext context() const { return context_; }
    CUdevice device() const { return device_; }

private:
    const DriverApi *api_ = nullptr;
    CUdevice device_ = 0;
    CUcontext context_ = nullptr;
    bool held_ = false;
};

}  // namespace tf
