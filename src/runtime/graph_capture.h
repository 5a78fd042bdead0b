/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Graph capture on a slot: its begin and end, the one check of the calls
// that cannot run inside a capture, and what the queue-only calls add to a
// capture (NOTE [capture] in src/README.md).
#pragma once

#include <cuda.h>

#include "runtime/call_frame.h"
#include "runtime/slot_capture.h"

struct tf_event;

namespace tf {

// A capture ended with a graph, and what its launches need.
struct EndedCapture {
    CUgraph graph = nullptr;
    CaptureContents contents;
};

// TF_ERROR_RUNTIME_STATE, naming the capture, when slot `slot` of `state`
// (stream `stream`, the primary context current) captures a graph: one begun
// by tf_graph_capture_begin (one atomic load), or else, as the driver says
// (cuStreamIsCapturing, one call), one the caller began on the stream.
// `why` says what the call would do that a capture cannot.
tf_status refuse_capture(RuntimeState &state, int slot, CUstream stream, const char *why);
// The same without asking the driver (NOTE [capture]: the calls too cheap
// for a driver call, which refuse the library's own captures only).
tf_status refuse_own_capture(RuntimeState &state, int slot, const char *why);

// The capture calls; the frame entered and its slot locked.
tf_status begin_capture(CallFrame &frame);
// Ends the slot's capture: TF_OK with the graph, or a failure after which
// the capture is over (nothing kept, the slot as before) or, as the message
// says, still open.
tf_status end_capture(CallFrame &frame, EndedCapture *out);
tf_status abort_capture(CallFrame &frame);
// Teardown: a capture still open on a slot is ended and its graph dropped.
void discard_capture(RuntimeState &state, int slot);
// cuGraphDestroy of a captured graph once instantiated or dropped (NULL: no
// call); a failure is logged and the graph leaked.
void destroy_captured_graph(const DriverApi &api, CUgraph graph);

// What the queue-only calls do on a capturing slot (the frame entered):
// a copy to or from page-locked memory: HostPool::begin_use, or while the
// slot captures, HostPool::hold and the range added to the capture;
tf_status use_host_range(CallFrame &frame, const char *name, const void *ptr, size_t len,
                         HostPool::Use *use);
// tf_host_record_use: HostPool::record_use, or the range added;
tf_status note_host_use(CallFrame &frame, void *ptr);
// tf_cublas_enqueue / tf_cublaslt_enqueue (slot locked): while capturing,
// the capture notes that its work uses the slot's workspace (one atomic
// load otherwise);
void note_workspace_use(CallFrame &frame);
// tf_event_record / tf_event_wait: while capturing, an event record or wait
// node (each launch records or waits), the event held by the capture;
tf_status record_event(CallFrame &frame, tf_event *event);
tf_status wait_for_event(CallFrame &frame, tf_event *event);
// tf_slot_wait for slot `other` (created, not the frame's): an event wait,
// or while capturing a wait node each launch renews (the slot added).
tf_status wait_for_slot(CallFrame &frame, int other);
// tf_event_synchronize / tf_event_query: refused while the event's latest
// record is a node of an open capture.
tf_status refuse_captured_event(const tf_event *event);

}  // namespace tf
