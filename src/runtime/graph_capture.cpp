// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/graph_capture.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "driver/cuda_status.h"
#include "runtime/event.h"
#include "runtime/slot_order.h"
#include "util/log.h"

namespace tf {
namespace {

// Capture numbers, process-wide: an event's mark names one capture only.
std::atomic<uint64_t> g_next_capture{1};

long os_thread() { return static_cast<long>(syscall(SYS_gettid)); }

tf_status fail_captured(SlotCapture &c, int slot, const char *why) __attribute__((cold, noinline));
tf_status fail_captured(SlotCapture &c, int slot, const char *why) {
    long thread = 0;
    {
        std::lock_guard<std::mutex> hold(c.mutex);
        thread = c.thread;
    }
    return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                   "slot %d is capturing a graph (begun by tf_graph_capture_begin on thread %ld); "
                   "%s; end the capture first (tf_graph_capture_end, tf_graph_capture_update or "
                   "tf_graph_capture_abort)",
                   slot, thread, why);
}

tf_status fail_not_capturing(const DriverApi &api, CUstream stream, int slot)
    __attribute__((cold, noinline));

// The driver's capture status of `stream`, for a capture begun outside the
// library.  NONE when the driver cannot tell (no cuStreamIsCapturing, or a
// failed query): the call then goes on as before 1.2, and its own driver
// calls report what is wrong (a sticky fault, say).
CUstreamCaptureStatus driver_status(const DriverApi &api, CUstream stream) {
    CUstreamCaptureStatus s = CU_STREAM_CAPTURE_STATUS_NONE;
    if (api.cuStreamIsCapturing && api.cuStreamIsCapturing(stream, &s) != CUDA_SUCCESS)
        s = CU_STREAM_CAPTURE_STATUS_NONE;
    return s;
}

tf_status fail_not_capturing(const DriverApi &api, CUstream stream, int slot) {
    if (driver_status(api, stream) != CU_STREAM_CAPTURE_STATUS_NONE)
        return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                       "the stream of slot %d is capturing a graph begun outside this library "
                       "(cuStreamBeginCapture on its stream); end it with cuStreamEndCapture",
                       slot);
    return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                   "slot %d is not capturing a graph; tf_graph_capture_begin starts a capture",
                   slot);
}

// cuStreamEndCapture; *closed: the stream no longer captures afterwards
// (also when the end failed, as an invalidated capture's does).  Records
// nothing.
CUresult stop_capture(const DriverApi &api, CUstream stream, CUgraph *graph, bool *closed) {
    CUresult r =
        api.cuStreamEndCapture ? api.cuStreamEndCapture(stream, graph) : CUDA_ERROR_NOT_FOUND;
    CUstreamCaptureStatus s = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    // Unknown counts as open: the caller may end it again, but never finds
    // its later work captured without knowing.
    *closed = r == CUDA_SUCCESS ||
              (api.cuStreamIsCapturing && api.cuStreamIsCapturing(stream, &s) == CUDA_SUCCESS &&
               s == CU_STREAM_CAPTURE_STATUS_NONE);
    return r;
}

tf_status fail_stop(const DriverApi &api, CUresult r, bool closed) __attribute__((cold, noinline));
tf_status fail_stop(const DriverApi &api, CUresult r, bool closed) {
    if (!api.cuStreamEndCapture) return fail_missing("cuStreamEndCapture");
    const char *what =
        !closed ? "the capture is still open: end it again (tf_graph_capture_end, "
                  "tf_graph_capture_update or tf_graph_capture_abort)"
        : r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
            ? "an earlier call on the slot's stream invalidated the capture; it is over, "
              "nothing was kept and the slot works as before"
            : "the capture is over, nothing was kept and the slot works as before";
    return fail_cuda(api, "cuStreamEndCapture", r, what);
}

// The slot's capture once its stream no longer captures: its contents, the
// events' marks of it cleared.
CaptureContents close_capture(SlotCapture &c) {
    CaptureContents taken;
    uint64_t id = 0;
    {
        std::lock_guard<std::mutex> hold(c.mutex);
        id = c.id.exchange(0, std::memory_order_acq_rel);
        taken.swap(c.contents);
    }
    taken.memory.close();
    for (tf_event *e : taken.events) {
        uint64_t expected = id;
        e->capture_id.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
    }
    return taken;
}

}  // namespace

void destroy_captured_graph(const DriverApi &api, CUgraph graph) {
    if (!graph) return;
    CUresult r = api.cuGraphDestroy ? api.cuGraphDestroy(graph) : CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_DEINITIALIZED) return;
    char what[96];
    log(TF_LOG_WARNING, "%s: cuGraphDestroy of the captured graph failed: %s; it is leaked",
        current_operation(), describe_cuda(api, r, what, sizeof what));
}

tf_status refuse_own_capture(RuntimeState &state, int slot, const char *why) {
    if (!state.gate(slot).capturing()) return TF_OK;
    return fail_captured(state.slot(slot).capture, slot, why);
}

tf_status refuse_capture(RuntimeState &state, int slot, CUstream stream, const char *why) {
    tf_status st = refuse_own_capture(state, slot, why);
    if (st != TF_OK || driver_status(state.api(), stream) == CU_STREAM_CAPTURE_STATUS_NONE)
        return st;
    return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                   "the stream of slot %d is capturing a graph begun outside this library "
                   "(cuStreamBeginCapture on its stream); %s; end that capture first",
                   slot, why);
}

tf_status begin_capture(CallFrame &frame) {
    RuntimeState &state = frame.state();
    const DriverApi &api = state.api();
    const int slot = frame.slot();
    const CUstream stream = frame.stream();
    tf_status st = refuse_capture(state, slot, stream, "a slot captures one graph at a time");
    if (st != TF_OK) return st;
    SlotCapture &c = state.slot(slot).capture;
    {
        std::lock_guard<std::mutex> hold(c.mutex);
        c.thread = os_thread();
        c.id.store(g_next_capture.fetch_add(1, std::memory_order_relaxed),
                   std::memory_order_release);
    }
    // Relaxed mode: other threads' calls are never refused because this slot
    // captures, and the capture may end on another thread (NOTE [capture]).
    st = state.gate(slot).begin(api, stream, [&] {
        return TF_CU(api, cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    });
    if (st != TF_OK) c.id.store(0, std::memory_order_release);
    return st;
}

namespace {

// The end of a slot's capture on the driver, under the slot's gate.
struct Stopped {
    CUgraph graph = nullptr;
    CUresult result = CUDA_SUCCESS;
    bool closed = false;  // the stream no longer captures
};

Stopped stop_slot(RuntimeState &state, int slot, CUstream stream) {
    Stopped s;
    state.gate(slot).end([&](bool *closed) {
        s.result = stop_capture(state.api(), stream, &s.graph, closed);
        s.closed = *closed;
        return TF_OK;
    });
    return s;
}

}  // namespace

tf_status end_capture(CallFrame &frame, EndedCapture *out) {
    RuntimeState &state = frame.state();
    const DriverApi &api = state.api();
    const int slot = frame.slot();
    if (!state.gate(slot).capturing()) return fail_not_capturing(api, frame.stream(), slot);
    Stopped s = stop_slot(state, slot, frame.stream());
    if (!s.closed) return fail_stop(api, s.result, false);
    CaptureContents contents = close_capture(state.slot(slot).capture);
    if (s.result != CUDA_SUCCESS) return fail_stop(api, s.result, true);
    uint64_t unfreed_bytes = 0;
    if (contents.memory.unfreed(&unfreed_bytes) != 0) {
        destroy_captured_graph(api, s.graph);  // never instantiated: nothing was allocated
        return fail_unfreed(contents.memory);
    }
    out->graph = s.graph;
    out->contents = std::move(contents);
    return TF_OK;
}

tf_status abort_capture(CallFrame &frame) {
    RuntimeState &state = frame.state();
    const DriverApi &api = state.api();
    const int slot = frame.slot();
    if (!state.gate(slot).capturing()) return fail_not_capturing(api, frame.stream(), slot);
    Stopped s = stop_slot(state, slot, frame.stream());
    if (!s.closed) return fail_stop(api, s.result, false);
    destroy_captured_graph(api, s.graph);
    close_capture(state.slot(slot).capture);
    return TF_OK;  // however the end went, the capture is over
}

void discard_capture(RuntimeState &state, int slot) {
    if (!state.gate(slot).capturing()) return;
    Stopped s = stop_slot(state, slot, state.existing_stream(slot));
    if (!s.closed)  // the runtime goes: nothing is captured on the slot again
        state.gate(slot).end([](bool *closed) { return *closed = true, TF_OK; });
    log(TF_LOG_WARNING, "%s: slot %d was still capturing a graph; the capture is discarded",
        current_operation(), slot);
    destroy_captured_graph(state.api(), s.graph);
    close_capture(state.slot(slot).capture);
}

tf_status use_host_range(CallFrame &frame, const char *name, const void *ptr, size_t len,
                         HostPool::Use *use) {
    RuntimeState &state = frame.state();
    if (!state.gate(frame.slot()).capturing())
        return state.host_pool().begin_use(name, ptr, len, frame.slot(), frame.stream(), use);
    SlotCapture &c = state.slot(frame.slot()).capture;
    std::lock_guard<std::mutex> hold(c.mutex);
    c.contents.host.reserve(c.contents.host.size() + 1);  // may throw: nothing is held yet
    HostPool::Held held{};
    tf_status st = state.host_pool().hold(name, ptr, len, &held, use);
    if (st == TF_OK) c.contents.host.push_back(held);
    return st;
}

tf_status note_host_use(CallFrame &frame, void *ptr) {
    RuntimeState &state = frame.state();
    if (!state.gate(frame.slot()).capturing())
        return state.host_pool().record_use(ptr, frame.slot(), frame.stream());
    HostPool::Use use;
    return use_host_range(frame, "ptr", ptr, 1, &use);
}

void note_workspace_use(CallFrame &frame) {
    RuntimeState &state = frame.state();
    if (!state.gate(frame.slot()).capturing()) return;
    // The slot lock is held: the capture neither begins nor ends meanwhile.
    SlotCapture &c = state.slot(frame.slot()).capture;
    std::lock_guard<std::mutex> hold(c.mutex);
    c.contents.workspace_slot = frame.slot();
}

namespace {

// Queues an event node on the capturing slot (call: the driver entry that
// does it) and lets the capture hold the event.
template <class Queue>
tf_status capture_event_node(CallFrame &frame, tf_event *event, Queue &&queue) {
    SlotCapture &c = frame.state().slot(frame.slot()).capture;
    std::lock_guard<std::mutex> hold(c.mutex);
    c.contents.events.reserve(c.contents.events.size() + 1);  // may throw: nothing queued
    tf_status st = queue();
    if (st != TF_OK) return st;
    retain_handle(event);
    c.contents.events.push_back(event);
    return TF_OK;
}

}  // namespace

tf_status record_event(CallFrame &frame, tf_event *event) {
    const DriverApi &api = frame.api();
    const int slot = frame.slot();
    if (!frame.state().gate(slot).capturing()) {
        tf_status st = TF_CU(api, cuEventRecord, event->event, frame.stream());
        if (st == TF_OK) event->capture_id.store(0, std::memory_order_release);
        return st;
    }
    tf_status st = capture_event_node(frame, event, [&] {
        return TF_CU(api, cuEventRecordWithFlags, event->event, frame.stream(),
                     CU_EVENT_RECORD_EXTERNAL);
    });
    if (st == TF_OK) {
        event->capture_slot.store(slot, std::memory_order_relaxed);
        event->capture_id.store(frame.state().slot(slot).capture.id.load(std::memory_order_relaxed),
                                std::memory_order_release);
    }
    return st;
}

tf_status wait_for_event(CallFrame &frame, tf_event *event) {
    const DriverApi &api = frame.api();
    if (!frame.state().gate(frame.slot()).capturing())
        return TF_CU(api, cuStreamWaitEvent, frame.stream(), event->event, CU_EVENT_WAIT_DEFAULT);
    return capture_event_node(frame, event, [&] {
        return TF_CU(api, cuStreamWaitEvent, frame.stream(), event->event, CU_EVENT_WAIT_EXTERNAL);
    });
}

tf_status wait_for_slot(CallFrame &frame, int other) {
    RuntimeState &state = frame.state();
    const DriverApi &api = state.api();
    CUevent order = nullptr, marked = nullptr;
    tf_status st = slot_order_event(api, &state.slot(other).resources.order, &order);
    if (st == TF_OK) st = state.gate(other).mark(api, state.existing_stream(other), order, &marked);
    if (st != TF_OK) return st;
    if (!state.gate(frame.slot()).capturing())
        return TF_CU(api, cuStreamWaitEvent, frame.stream(), marked, CU_EVENT_WAIT_DEFAULT);
    // A wait node on the order event, which each launch records anew.
    if (marked != order)
        return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                       "slots %d and %d both capture a graph; a capture waits only for slots "
                       "that do not capture",
                       frame.slot(), other);
    st = TF_CU(api, cuStreamWaitEvent, frame.stream(), order, CU_EVENT_WAIT_EXTERNAL);
    if (st != TF_OK) return st;
    SlotCapture &c = state.slot(frame.slot()).capture;
    std::lock_guard<std::mutex> hold(c.mutex);
    c.contents.waits.set(static_cast<size_t>(other));
    return TF_OK;
}

tf_status refuse_captured_event(const tf_event *event) {
    if (event->capture_id.load(std::memory_order_acquire) == 0) return TF_OK;
    return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                   "the event's latest record is a node of the graph slot %d is capturing: it is "
                   "recorded only when that graph is launched; end the capture and launch the "
                   "graph first",
                   event->capture_slot.load(std::memory_order_relaxed));
}

}  // namespace tf
