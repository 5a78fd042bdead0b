// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/stream_slot.h"

#include "util/error.h"
#include "util/thread_sequence.h"

namespace tf {

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
    return TF_OK;
}

void SlotLock::unlock() {
    owner_.store(0, std::memory_order_relaxed);
    mutex_.unlock();
}

}  // namespace tf
