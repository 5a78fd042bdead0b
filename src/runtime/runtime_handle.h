// Runtime handles: what a tf_runtime* points to.
//
// A handle is a small shell holding a reference count, an optional bound
// slot and a shared reference to the runtime's state.  tf_runtime_retain
// counts on the shell; tf_runtime_bind_slot makes a new shell on the same
// state.  The state is torn down when its last shell goes.
//
// Released shells are marked dead and kept in a bounded quarantine rather
// than freed, so a handle used after release is usually reported as
// TF_ERROR_INVALID_HANDLE instead of reading freed memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/runtime_state.h"
#include "util/error.h"

struct tf_runtime {
    std::atomic<uint64_t> magic;
    std::atomic<uint32_t> refs;
    int32_t bound_slot;  // -1: the calling thread's slot
    std::shared_ptr<tf::RuntimeState> state;
};

namespace tf {

constexpr uint64_t kLiveHandle = 0x74665f72756e7431ull;  // "tf_runt1"
constexpr uint64_t kDeadHandle = 0x74665f646561643full;  // "tf_dead?"

// A new shell with one reference.  Throws std::bad_alloc.
tf_runtime *make_handle(std::shared_ptr<RuntimeState> state, int32_t bound_slot);

// NULL -> TF_ERROR_INVALID_ARGUMENT; released or foreign -> TF_ERROR_INVALID_HANDLE.
inline tf_status check_handle(const tf_runtime *rt) {
    if (!rt) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "runtime handle is NULL");
    uint64_t magic = rt->magic.load(std::memory_order_acquire);
    if (magic == kLiveHandle) return TF_OK;
    if (magic == kDeadHandle)
        return TF_FAIL(TF_ERROR_INVALID_HANDLE, "runtime handle %p was already released",
                       static_cast<const void *>(rt));
    return TF_FAIL(TF_ERROR_INVALID_HANDLE, "%p is not a runtime handle",
                   static_cast<const void *>(rt));
}

// Drops one reference; the last one kills the shell and drops its state
// reference (which may tear the runtime down on this thread).
void release_handle(tf_runtime *rt);

// The stream slot calls through `rt` use on this thread.
inline int handle_slot(const tf_runtime *rt) {
    return rt->bound_slot >= 0 ? rt->bound_slot : rt->state->slot_for_thread();
}

}  // namespace tf
