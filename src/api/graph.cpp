// SPDX-License-Identifier: MIT OR Apache-2.0
// Graph capture on the slot streams: tf_graph_capture_begin / _end /
// _update / _abort, tf_graph_launch, tf_graph_retain / _release
// (NOTE [capture] in src/README.md).
#include <memory>

#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/graph.h"
#include "runtime/graph_capture.h"

namespace {

// A live graph of the runtime `state` (any handle of it).
tf_status check_graph(const tf::RuntimeState &state, const tf_graph *graph) {
    tf_status st = tf::check_handle(tf::kGraphKind, graph);
    if (st == TF_OK && graph->state.get() != &state)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "the graph belongs to another runtime (identity %llu, this one %llu); "
                       "use a handle of its own runtime",
                       static_cast<unsigned long long>(graph->state->identity()),
                       static_cast<unsigned long long>(state.identity()));
    return st;
}

// The capture calls: the slot's stream, the context, the slot lock, then
// body(frame).
template <class Body>
tf_status on_locked_slot(tf_runtime *rt, Body &&body) {
    tf::CallFrame frame(rt);
    tf_status st = frame.enter();
    if (st == TF_OK) st = frame.lock_slot();
    return st == TF_OK ? body(frame) : st;
}

}  // namespace

extern "C" {

TF_API tf_status tf_graph_capture_begin(tf_runtime *rt) {
    static const char op[] = "tf_graph_capture_begin";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &) -> tf_status {
        return on_locked_slot(rt, [](tf::CallFrame &frame) { return tf::begin_capture(frame); });
    });
}

TF_API tf_status tf_graph_capture_end(tf_runtime *rt, tf_graph **out) {
    static const char op[] = "tf_graph_capture_end";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &) -> tf_status {
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
        std::unique_ptr<tf_graph> g(new tf_graph(rt->state));  // before the capture ends
        return on_locked_slot(rt, [&](tf::CallFrame &frame) {
            tf::EndedCapture ended;
            tf_status st = tf::end_capture(frame, &ended);
            if (st == TF_OK) st = tf::instantiate_graph(frame.api(), std::move(ended), g.get());
            if (st == TF_OK) *out = g.release();
            return st;
        });
    });
}

TF_API tf_status tf_graph_capture_update(tf_runtime *rt, tf_graph *graph,
                                         int32_t *out_updated_in_place) {
    static const char op[] = "tf_graph_capture_update";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        tf_status st = check_graph(state, graph);
        if (st != TF_OK) return st;
        return on_locked_slot(rt, [&](tf::CallFrame &frame) {
            tf::EndedCapture ended;
            int32_t in_place = 0;
            tf_status s = tf::end_capture(frame, &ended);
            if (s == TF_OK) s = tf::update_graph(frame.api(), std::move(ended), graph, &in_place);
            if (s == TF_OK && out_updated_in_place) *out_updated_in_place = in_place;
            return s;
        });
    });
}

TF_API tf_status tf_graph_capture_abort(tf_runtime *rt) {
    static const char op[] = "tf_graph_capture_abort";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &) -> tf_status {
        return on_locked_slot(rt, [](tf::CallFrame &frame) { return tf::abort_capture(frame); });
    });
}

TF_API tf_status tf_graph_launch(tf_runtime *rt, tf_graph *graph) {
    static const char op[] = "tf_graph_launch";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        tf_status st = check_graph(state, graph);
        tf::CallFrame frame(rt);
        if (st == TF_OK) st = frame.enter();
        if (st == TF_OK)
            st = tf::refuse_own_capture(state, frame.slot(),
                                        "graphs are not launched inside a capture");
        return st == TF_OK ? tf::launch_graph(frame, graph) : st;
    });
}

TF_API tf_status tf_graph_retain(tf_graph *graph) {
    return tf::retain_handle("tf_graph_retain", graph, tf::kGraphKind);
}

TF_API tf_status tf_graph_release(tf_graph *graph) {
    return tf::release_handle("tf_graph_release", graph, tf::kGraphKind, [](tf_graph *dead) {
        std::shared_ptr<tf::RuntimeState> state = std::move(dead->state);
        tf::destroy_in_context(*state, "cuGraphExecDestroy",
                               [&] { return tf::destroy_graph(state->api(), *dead); });
        tf::CaptureContents().swap(dead->contents);  // its events go, whatever the state
    });                                              // `state` goes last
}

}  // extern "C"
