/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Deferred release of workspaces behind CUDA events (tf_workspace_retire).
//
// A retirement records an event on its slot's stream and queues
// (resource, release) behind it; the release runs once the event reports
// completion.  The event is the completion witness a stream barrier would
// otherwise give, so a resource is never released while work queued before
// its retirement may still use it:
//  - events on one stream complete in order, so each slot's queue is polled
//    from its front and polling stops at the first event not yet reached;
//  - a full queue, or an event that cannot be created or recorded, falls back
//    to waiting for the stream; a failed event query falls back to waiting
//    for the entry's stream; when that wait fails too the resource leaks
//    (counted), it is never released early;
//  - releases run outside the queue lock, so they may call the library.
//
// Counters (tf_retirement_stats).  INVARIANT, at every snapshot:
//   deferred + barrier_fallbacks == released + leaked + in_flight
// A queued retirement counts in deferred and in_flight; it leaves in_flight
// for released or leaked under the lock, in the same step: when its event is
// found passed (released, before its release runs), or when the stream wait
// behind a failed query returns.  A retirement that was never queued counts
// in barrier_fallbacks once its stream wait returns, together with released
// or leaked.  Releases a thread found but never started because it unwound
// (a release was cancelled or called pthread_exit) move from released (or
// in_flight) to leaked.
//
// Leaks of earlier retirements that tf_workspace_retire finds cannot be its
// status (that describes the caller's own resource): they are kept here and
// reported once, by the next tf_workspace_poll or tf_runtime_sync.
//
// One queue per runtime, under its own mutex: retirement is not on the
// enqueue hot path, and a per-runtime bound is what the options describe.
// Events are pooled: a completed entry's event is reused by the next
// retirement, so steady state creates none.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

struct Retirement {
    void *resource;
    void (*release)(void *resource, void *user_data);
    void *user_data;
};

// Retirements found leaked (event query and stream wait both failed): how
// many, and the first one's resource and failed wait.
struct RetirementLeaks {
    uint64_t count = 0;
    void *first = nullptr;
    CUresult first_result = CUDA_SUCCESS;

    void add(void *resource, CUresult r) {
        if (count++ == 0) {
            first = resource;
            first_result = r;
        }
    }
    void add(const RetirementLeaks &later) {
        if (later.count == 0) return;
        if (count == 0) {
            first = later.first;
            first_result = later.first_result;
        }
        count += later.count;
    }
};

class RetirementQueue {
public:
    RetirementQueue() = default;
    RetirementQueue(const RetirementQueue &) = delete;
    RetirementQueue &operator=(const RetirementQueue &) = delete;

    // Queues `r` behind an event on `stream` (the caller's slot `slot` of
    // `slot_count`), after running the releases the device has passed.  The
    // primary context is current.  Returns TF_OK when queued or released by
    // the barrier fallback; the barrier's failure (the resource leaked)
    // otherwise.  Leaks of earlier retirements found on the way are kept for
    // the next poll() to report.
    tf_status retire(const DriverApi &api, int slot_count, uint32_t capacity, int slot,
                     CUstream stream, const Retirement &r);

    // Runs the releases of every retirement the device has passed, on every
    // slot, without waiting.  The primary context is current.  Returns
    // TF_OK, or TF_ERROR_CUDA (the status of the first failed wait) when a
    // retirement whose event query failed leaked here or, unreported until
    // now, inside an earlier retire(): each leak is logged when found and
    // reported once.
    tf_status poll(const DriverApi &api);

    // Reports (once) the leaks an earlier retire() found, as poll() does,
    // without polling (no driver call).
    tf_status report_unreported(const DriverApi &api);

    // Teardown after every stream was synchronized: runs every pending
    // release and destroys the pooled events.  The primary context is current.
    void release_all(const DriverApi &api);

    // A consistent snapshot of the counters into *out.  In a forked child
    // (`forked_child`) the lock may be held by a parent thread that does
    // not exist here: false instead of waiting for it.
    bool stats(uint32_t capacity, bool forked_child, tf_retirement_stats *out) const;

private:
    struct Entry {
        Retirement r;
        CUevent event;  // NULL for a barrier fallback's own retirement
        CUstream stream;
    };
    // Work found under the lock, done after it, in this order: releases to
    // run, entries whose event query failed (to resolve by waiting for
    // their stream), then a barrier fallback's own retirement.
    struct Found {
        std::vector<Entry> done;
        std::vector<Entry> failed;
        std::vector<Entry> last;
    };
    class Resolution;

    void collect_locked(const DriverApi &api, Found *found);
    CUevent take_event_locked(const DriverApi &api);
    RetirementLeaks finish(const DriverApi &api, Found *found);
    tf_status barrier_fallback(const DriverApi &api, CUstream stream, const Retirement &r,
                               RetirementLeaks *earlier);
    RetirementLeaks take_unreported();

    mutable std::mutex mutex_;
    std::vector<std::deque<Entry>> slots_;  // per slot, oldest first
    std::vector<CUevent> pool_;             // recorded-and-passed events, reusable
    tf_retirement_stats stats_{};
    RetirementLeaks unreported_;  // found inside retire(), for the next poll()
};

// Runs a caller's release with the primary context current; a C++ exception
// it throws is logged and dropped, a context it leaves current is replaced
// by the one current before it.
void run_release(const DriverApi &api, const Retirement &r);

}  // namespace tf
