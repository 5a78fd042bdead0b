/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Per-slot resources of the features built on the slot streams.
//
// Each member is created lazily, under the slot lock, by the feature that
// needs it, and released by release_slot_resources() at teardown, only after
// every stream of the runtime has been synchronized.
#pragma once

#include "driver/driver_api.h"
#include "runtime/slot_cublas.h"
#include "runtime/slot_order.h"
#include "transfer/transfer_slot.h"

namespace tf {

struct SlotResources {
    SlotCublas cublas;  // tf_cublas_enqueue (runtime/slot_cublas.h)
    SlotOrderEvent
        order;  // tf_slot_wait; atomic, used without the slot lock (runtime/slot_order.h)
    TransferSlot transfer;  // scalar and bulk download staging
};

// Releases what `resources` holds.  The runtime's primary context is current
// and every stream has been synchronized.  Failures are logged.
void release_slot_resources(const DriverApi &api, SlotResources &resources);

}  // namespace tf
