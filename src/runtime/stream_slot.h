/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Stream slots: the per-slot stream, the per-slot lock and what hangs off it.
//
// INVARIANT: a slot's stream is created once, as a non-blocking stream in the
// runtime's primary context, published with a release store and never
// replaced or destroyed while the runtime lives.  Readers need only an
// acquire load.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "runtime/slot_capture.h"
#include "runtime/slot_resources.h"
#include "tenferro_gpu.h"

namespace tf {

// The per-slot lock.  It serializes everything that mutates the slot's
// resources (cuBLAS handle configuration and enqueue, the staging buffer).
// A thread that already holds it, for example from inside a callback it runs
// under the lock, gets TF_ERROR_RUNTIME_STATE instead of a deadlock.
// Calls take it through their CallFrame (runtime/call_frame.h), on the
// thread that gives it back.
class SlotLock {
public:
    tf_status lock(int slot);
    void unlock();
    // Whether the calling thread holds this lock.
    bool held_here() const;
    // Whether the calling thread holds any slot lock, of any runtime: a
    // call that would block on another slot's lock refuses instead
    // (runtime/graph_workspace.h), so that two threads each holding one
    // never wait for each other.
    static bool thread_holds_any();

private:
    std::mutex mutex_;
    std::atomic<uint32_t> owner_{0};  // holder's thread tag, 0 when free
};

struct StreamSlot {
    std::atomic<CUstream> stream{nullptr};
    SlotLock lock;
    SlotResources resources;  // guarded by `lock`
    SlotCapture capture;      // runtime/slot_capture.h; begun and ended under `lock`
};

}  // namespace tf
