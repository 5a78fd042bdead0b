/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The slots that use an allocation of a device's pool besides the one that
// frees it (tf_memory_record_use), so that its free waits for their work.
//
// INVARIANT (recorded use): once slot S of runtime R recorded a use of
// allocation A, tf_free(A) from any other slot queues, before its
// cuMemFreeAsync, a wait (cuStreamWaitEvent) for an event recorded on S's
// stream at the free: the pool can hand A's memory out again only after
// the work S had queued by then.  Events come from a small pool shared by
// the device's runtimes (they share the primary context); an event is
// reusable once the wait is queued, since a wait sees the record made
// before it.  A runtime's uses are dropped in its teardown, once its
// streams are synchronized and before they are destroyed, so no free ever
// records on a destroyed stream.
//
// Locking: one mutex, held across the event calls of a free (driver calls
// that do not wait) and by the teardown's drop.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

class RuntimeState;

class RecordedUses {
public:
    RecordedUses() = default;
    RecordedUses(const RecordedUses &) = delete;
    RecordedUses &operator=(const RecordedUses &) = delete;

    // Slot `slot` of `runtime` uses the allocation at `base`.  Throws
    // std::bad_alloc.
    void add(uint64_t base, const RuntimeState *runtime, int slot);
    // Orders a free of `base` queued next on `stream` (slot `slot` of
    // `freer`) after the work of every other recorded slot, then forgets
    // the uses.  On failure nothing is forgotten and the free must not be
    // queued.
    tf_status order_free(const DriverApi &api, const RuntimeState *freer, int slot, CUstream stream,
                         uint64_t base);
    // Forgets the uses of `base` (freed).
    void forget(uint64_t base);
    // Forgets every use by `runtime` (its teardown).
    void forget_runtime(const RuntimeState *runtime);
    // Destroys the pooled events (the pool's end; the primary context is
    // current).  Failures are logged.
    void release(const DriverApi &api);
    bool has_events() {
        std::lock_guard<std::mutex> hold(mutex_);
        return !events_.empty();
    }

private:
    struct Use {
        const RuntimeState *runtime;
        int slot;
    };
    tf_status wait_for(const DriverApi &api, CUstream use_stream, CUstream stream);

    std::mutex mutex_;
    std::unordered_map<uint64_t, std::vector<Use>> uses_;  // by allocation base
    std::vector<CUevent> events_;                          // idle, reusable
};

}  // namespace tf
