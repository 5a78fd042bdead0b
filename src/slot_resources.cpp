#include "slot_resources.h"

namespace tf {

void release_slot_resources(const DriverApi &, SlotResources &) {}

}  // namespace tf
