/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What a tf_event* points to: a driver event of one runtime.
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>

#include "runtime/shared_object.h"

namespace tf {
constexpr uint64_t kLiveEvent = 0x74665f65766e7431ull;  // "tf_evnt1"
constexpr HandleKind kEventKind{kLiveEvent, "event", TF_ERROR_INVALID_ARGUMENT, "a live"};
}  // namespace tf

struct tf_event : tf::SharedObject {
    explicit tf_event(std::shared_ptr<tf::RuntimeState> s)
        : SharedObject(tf::kLiveEvent, &tf::free_shell<tf_event>, std::move(s)) {}

    CUevent event = nullptr;
    // Nonzero while the event's latest record is a node of a capture still
    // open: that capture's number (runtime/slot_capture.h), and its slot for
    // messages.  Cleared when the capture ends.
    std::atomic<uint64_t> capture_id{0};
    std::atomic<int> capture_slot{-1};
};

namespace tf {

// The event's driver object destroyed, for its last release.
CUresult destroy_event(const DriverApi &api, const tf_event &e);
// Drops a reference the library holds (a graph's, a capture's); the last one
// destroys the event in its runtime's context, as tf_event_release does.
void drop_event(tf_event *e);

}  // namespace tf
