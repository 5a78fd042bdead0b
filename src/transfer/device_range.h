/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Checking a caller's device address before anything is queued.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/runtime_state.h"

namespace tf {

// TF_OK if [ptr, ptr + len) lies inside one live allocation of the device of
// `owner`; `name` ("src", "dst", "ptr") names the argument in the message.
// Not device memory, a range past the allocation's end, or another device's
// memory is TF_ERROR_INVALID_ARGUMENT; a failed query is its mapped status.
// A range of a live tf_alloc allocation is answered from the library's
// registry (transfer/allocation_registry.h) without a driver call; any
// other address costs one driver call (cuMemGetAddressRange) where the
// process sees one device, two (cuPointerGetAttribute for the device)
// where it sees more.
// The owner's context must be current: the driver may not find another
// device's allocation from a context of a different device.
tf_status check_device_range(const RuntimeState &owner, const char *name, uint64_t ptr, size_t len);

// As check_device_range, always asking the driver: for a check whose
// driver call also finds a sticky fault of the owner's context before
// anything is queued (the destination of a peer copy, api/peer.cpp).
tf_status check_device_range_with_driver(const RuntimeState &owner, const char *name, uint64_t ptr,
                                         size_t len);

// Device copies whose ranges overlap are undefined: TF_ERROR_INVALID_ARGUMENT.
tf_status check_no_overlap(uint64_t src, uint64_t dst, size_t len);

}  // namespace tf
