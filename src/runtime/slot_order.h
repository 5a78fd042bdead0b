/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The event of a stream slot that other slots wait for (tf_slot_wait).
//
// One event per slot, created at first use and published with a
// compare-and-swap, so it is read and recorded without the slot lock: a
// thread holding its own slot's lock inside a callback may wait for another
// slot without lock-order deadlocks.  Concurrent records of the same event
// are harmless: cuStreamWaitEvent waits for the latest record made before
// it, which covers at least the work the waiter asked for.
#pragma once

#include <cuda.h>

#include <atomic>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

struct SlotOrderEvent {
    std::atomic<CUevent> event{nullptr};
};

// The slot's event, created (timing disabled) at first use.  The primary
// context is current.
tf_status slot_order_event(const DriverApi &api, SlotOrderEvent *slot, CUevent *out);

// Teardown: destroys the event.  The primary context is current and every
// stream synchronized.  Failures are logged.
void release_slot_order(const DriverApi &api, SlotOrderEvent *slot);

}  // namespace tf
