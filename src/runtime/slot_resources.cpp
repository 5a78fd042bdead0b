// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/slot_resources.h"

namespace tf {

void release_slot_resources(const DriverApi &api, SlotResources &resources) {
    release_slot_cublas(api, &resources.cublas);
    release_slot_order(api, &resources.order);
    release_transfer_slot(api, resources.transfer);
}

}  // namespace tf
