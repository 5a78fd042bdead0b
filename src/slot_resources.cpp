#include "slot_resources.h"

namespace tf {

void release_slot_resources(const DriverApi &api, SlotResources &resources) {
    release_transfer_slot(api, resources.transfer);
}

}  // namespace tf
