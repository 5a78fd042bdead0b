/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// CaptureGate: whether a slot's stream captures a graph, and how work outside
// the slot bounds what the slot queued without touching a capture
// (NOTE [capture] in src/README.md).
//
// While a slot captures, an event recorded on its stream becomes part of the
// capture and a wait for the stream fails and invalidates it.  So every call
// that marks a slot's queued work from outside the slot's own calls (a
// page-locked block's free, an unregister, tf_slot_wait for that slot, a
// graph launch waiting for it) asks the gate: while the slot does not
// capture, the gate records the caller's event on the stream (or waits for
// the stream); while it does, it hands out the fence, an event recorded on
// the stream just before the capture began, which completes when the work
// queued before the capture has: captured work is not queued.  The check and
// the record happen under the gate's mutex, which the capture's begin and
// end take too, so a capture never begins between them.
//
// INVARIANTS: capturing() is true exactly from a successful begin() to an
// end() whose stop() reports the stream closed; the fence is recorded only
// in begin(), before the capture starts, and lives until release().
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

class CaptureGate {
public:
    // One acquire load, no lock: the check on every call's fast path.
    bool capturing() const { return capturing_.load(std::memory_order_acquire); }

    // Marks the work queued on `stream` (this gate's slot's) so far: records
    // `own` on it and sets *used to `own`, or while the slot captures sets
    // *used to the fence and records nothing.  The primary context is
    // current.
    tf_status mark(const DriverApi &api, CUstream stream, CUevent own, CUevent *used);
    // Waits for the work queued on `stream` so far: the stream (holding the
    // gate, so only for the rare waits that have no event), or the fence
    // while the slot captures.
    tf_status wait(const DriverApi &api, CUstream stream);

    // A capture's start: records the fence (made at the first capture) on
    // `stream`, then runs start() (cuStreamBeginCapture); capturing() from
    // then on if it succeeded.
    template <class Start>
    tf_status begin(const DriverApi &api, CUstream stream, Start &&start);
    // A capture's end: runs stop(&closed) (cuStreamEndCapture); capturing()
    // is false afterwards if stop set `closed`.
    template <class Stop>
    tf_status end(Stop &&stop);

    // Teardown, every stream synchronized: destroys the fence.
    void release(const DriverApi &api);

private:
    tf_status record_fence(const DriverApi &api, CUstream stream);

    std::mutex gate_;
    std::atomic<bool> capturing_{false};
    CUevent fence_ = nullptr;  // guarded by gate_
};

template <class Start>
tf_status CaptureGate::begin(const DriverApi &api, CUstream stream, Start &&start) {
    std::lock_guard<std::mutex> hold(gate_);
    tf_status st = record_fence(api, stream);
    if (st == TF_OK) st = start();
    if (st == TF_OK) capturing_.store(true, std::memory_order_release);
    return st;
}

template <class Stop>
tf_status CaptureGate::end(Stop &&stop) {
    std::lock_guard<std::mutex> hold(gate_);
    bool closed = false;
    tf_status st = stop(&closed);
    if (closed) capturing_.store(false, std::memory_order_release);
    return st;
}

}  // namespace tf
