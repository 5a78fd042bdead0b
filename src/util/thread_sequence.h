/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The calling thread's sequence number, which picks its stream slot.
#pragma once

#include <atomic>
#include <cstdint>

namespace tf {

extern std::atomic<uint32_t> g_next_thread;
// 0 until the thread first asks; then its sequence number + 1.
inline thread_local uint32_t t_thread_tag = 0;

// Threads are numbered 0, 1, 2, ... in the order they first call this.
// One thread-local read after the first call; no system call.
inline uint32_t thread_sequence() {
    uint32_t tag = t_thread_tag;
    if (tag == 0) {
        tag = g_next_thread.fetch_add(1, std::memory_order_relaxed) + 1;
        t_thread_tag = tag;
    }
    return tag - 1;
}

}  // namespace tf
