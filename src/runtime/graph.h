/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What a tf_graph* points to: an instantiated graph of one runtime, made
// from a slot's capture (runtime/graph_capture.h), and what its launches
// need (CaptureContents).  NOTE [capture] in src/README.md.
#pragma once

#include <cuda.h>

#include <memory>
#include <mutex>

#include "runtime/shared_object.h"
#include "runtime/slot_capture.h"

namespace tf {
constexpr uint64_t kLiveGraph = 0x74665f6772706831ull;  // "tf_grph1"
constexpr HandleKind kGraphKind{kLiveGraph, "graph", TF_ERROR_INVALID_ARGUMENT, "a live"};
class CallFrame;
struct EndedCapture;
}  // namespace tf

struct tf_graph : tf::SharedObject {
    explicit tf_graph(std::shared_ptr<tf::RuntimeState> s)
        : SharedObject(tf::kLiveGraph, &tf::free_shell<tf_graph>, std::move(s)) {}

    // Graph objects are not thread-safe in CUDA: every launch and update of
    // `exec` holds `mutex`, and so does every read of `contents`.
    std::mutex mutex;
    CUgraphExec exec = nullptr;
    tf::CaptureContents contents;
};

namespace tf {

// Instantiates an ended capture into `g` (which has no exec yet); the
// captured CUgraph is destroyed either way.  The primary context is current.
tf_status instantiate_graph(const DriverApi &api, EndedCapture &&ended, tf_graph *g);
// Makes `g` run an ended capture: its exec updated in place when the
// topology matches (*in_place 1), else a new instantiation replaces it (0).
// On failure `g` still runs its earlier capture.
tf_status update_graph(const DriverApi &api, EndedCapture &&ended, tf_graph *g, int32_t *in_place);
// Queues `g` on the frame's slot (entered; the slot does not capture).
tf_status launch_graph(CallFrame &frame, tf_graph *g);
// The last release: destroys the exec in its runtime's context.
CUresult destroy_graph(const DriverApi &api, const tf_graph &g);

}  // namespace tf
