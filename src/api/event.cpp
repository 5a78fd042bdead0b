// SPDX-License-Identifier: MIT OR Apache-2.0
// Explicit cross-slot ordering: tf_event.
#include <memory>

#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/event.h"
#include "runtime/graph_capture.h"

namespace {

template <class Body>
tf_status event_call(const char *op, tf_event *ev, Body &&body) {
    return tf::object_call(op, ev, tf::kEventKind, body);
}

}  // namespace

extern "C" {

TF_API tf_status tf_event_new(tf_runtime *rt, tf_event **out) {
    static const char op[] = "tf_event_new";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
        std::unique_ptr<tf_event> ev(new tf_event(rt->state));
        tf::CallFrame frame(state);
        tf_status st = frame.enter_context();
        if (st != TF_OK) return st;
        st = TF_CU(state.api(), cuEventCreate, &ev->event, CU_EVENT_DISABLE_TIMING);
        if (st != TF_OK) return st;
        *out = ev.release();
        return TF_OK;
    });
}

TF_API tf_status tf_event_retain(tf_event *event) {
    return tf::retain_handle("tf_event_retain", event, tf::kEventKind);
}

TF_API tf_status tf_event_release(tf_event *event) {
    return tf::release_shared("tf_event_release", event, tf::kEventKind, "cuEventDestroy",
                              tf::destroy_event);
}

TF_API tf_status tf_event_record(tf_runtime *rt, tf_event *event) {
    static const char op[] = "tf_event_record";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        tf_status st = tf::check_handle(tf::kEventKind, event);
        if (st != TF_OK) return st;
        if (event->state->context() != state.context())
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                           "the event belongs to device %d, the runtime to device %d; record "
                           "it with a runtime of its own device",
                           static_cast<int>(event->state->info().ordinal),
                           static_cast<int>(state.info().ordinal));
        tf::CallFrame frame(rt);
        if ((st = frame.enter()) != TF_OK) return st;
        return tf::record_event(frame, event);
    });
}

TF_API tf_status tf_event_wait(tf_runtime *rt, tf_event *event) {
    static const char op[] = "tf_event_wait";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &) -> tf_status {
        tf_status st = tf::check_handle(tf::kEventKind, event);
        if (st != TF_OK) return st;
        tf::CallFrame frame(rt);
        if ((st = frame.enter()) != TF_OK) return st;
        return tf::wait_for_event(frame, event);
    });
}

TF_API tf_status tf_event_synchronize(tf_event *event) {
    static const char op[] = "tf_event_synchronize";
    return event_call(op, event, [&](tf::RuntimeState &state) -> tf_status {
        tf_status st = tf::refuse_captured_event(event);
        tf::CallFrame frame(state);
        if (st == TF_OK) st = frame.enter_context();
        if (st != TF_OK) return st;
        return TF_CU(state.api(), cuEventSynchronize, event->event);
    });
}

TF_API tf_status tf_event_query(tf_event *event, int32_t *out_done) {
    static const char op[] = "tf_event_query";
    return event_call(op, event, [&](tf::RuntimeState &state) -> tf_status {
        if (!out_done) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_done is NULL");
        const tf::DriverApi &api = state.api();
        if (!api.cuEventQuery) return tf::fail_missing("cuEventQuery");
        tf_status st = tf::refuse_captured_event(event);
        tf::CallFrame frame(state);
        if (st == TF_OK) st = frame.enter_context();
        if (st != TF_OK) return st;
        CUresult r = api.cuEventQuery(event->event);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
            return tf::fail_cuda(api, "cuEventQuery", r);
        *out_done = r == CUDA_SUCCESS ? 1 : 0;
        return TF_OK;
    });
}

}  // extern "C"
