/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What a tf_event* points to: a driver event of one runtime.
#pragma once

#include <cuda.h>

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
};
