// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/stream_slot.h"

#include "util/error.h"
#include "util/thread_sequence.h"

namespace tf {
namespace {

// Slot locks the thread holds.  Trivially destructible, like the last error.
thread_local int t_slot_locks_held = 0;

}  // namespace

tf_status SlotLock::lock(int slot) {
    const uint32_t me = thread_sequence() + 1;
    // Only this thread can have stored its own tag, so a relaxed load suffices.
    if (owner_.load(std::memory_order_relaxed) == me)
        return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                       "stream slot %d is already held by this thread (a callback called back "
                       "into the slot it runs on); this would deadlock",
                       slot);
    mutex_.lock();
    owner_.store(me, std::memory_order_relaxed);
    ++t_slot_locks_held;
    return TF_OK;
}

void SlotLock::unlock() {
    --t_slot_locks_held;
    owner_.store(0, std::memory_order_relaxed);
    mutex_.unlock();
}

bool SlotLock::held_here() const {
    // As in lock(): only this thread stores its own tag.
    return owner_.load(std::memory_order_relaxed) == thread_sequence() + 1;
}

bool SlotLock::thread_holds_any() { return t_slot_locks_held != 0; }

}  // namespace tf
