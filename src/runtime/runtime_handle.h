/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Runtime handles: what a tf_runtime* points to.
//
// A handle (runtime/handle.h) is a small shell holding a reference count,
// an optional bound slot and a shared reference to the runtime's state.
// tf_runtime_retain counts on the shell; tf_runtime_bind_slot makes a new
// shell on the same state.  The state is torn down when its last shell
// goes; the shell itself waits in the quarantine, so a released handle is
// reported as TF_ERROR_INVALID_HANDLE.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/handle.h"
#include "runtime/runtime_state.h"

namespace tf {
constexpr uint64_t kLiveRuntime = 0x74665f72756e7431ull;  // "tf_runt1"
constexpr HandleKind kRuntimeKind{kLiveRuntime, "runtime handle", TF_ERROR_INVALID_HANDLE, "a"};
}  // namespace tf

struct tf_runtime : tf::Handle {
    tf_runtime(std::shared_ptr<tf::RuntimeState> s, int32_t slot)
        : Handle(tf::kLiveRuntime, &tf::free_shell<tf_runtime>),
          bound_slot(slot),
          state(std::move(s)) {}

    const int32_t bound_slot;  // -1: the calling thread's slot
    std::shared_ptr<tf::RuntimeState> state;
};

namespace tf {

// A new shell with one reference.  Throws std::bad_alloc.
inline tf_runtime *make_handle(std::shared_ptr<RuntimeState> state, int32_t bound_slot) {
    return new tf_runtime(std::move(state), bound_slot);
}

// NULL -> TF_ERROR_INVALID_ARGUMENT; released or foreign -> TF_ERROR_INVALID_HANDLE.
inline tf_status check_handle(const tf_runtime *rt) { return check_handle(kRuntimeKind, rt); }

// Drops one reference; the last one kills the shell and drops its state
// reference (which may tear the runtime down on this thread).
void release_runtime(tf_runtime *rt);

// The stream slot calls through `rt` use on this thread.
inline int handle_slot(const tf_runtime *rt) {
    return rt->bound_slot >= 0 ? rt->bound_slot : rt->state->slot_for_thread();
}

}  // namespace tf
