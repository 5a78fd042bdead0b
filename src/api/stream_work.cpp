// SPDX-License-Identifier: MIT OR Apache-2.0
// Any library's work on the slot streams and ordering between slots:
// tf_stream_enqueue, tf_slot_wait.
#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/graph_capture.h"
#include "util/callback.h"

extern "C" {

TF_API tf_status tf_stream_enqueue(tf_runtime *rt, int32_t (*fn)(void *stream, void *user_data),
                                   void *user_data) {
    static const char op[] = "tf_stream_enqueue";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &) -> tf_status {
        if (!fn) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "fn is NULL");
        tf::CallFrame frame(rt);
        tf_status st = frame.enter(tf::CallerCode::runs);
        if (st == TF_OK) st = frame.lock_slot();
        if (st != TF_OK) return st;
        return tf::invoke_callback(fn, frame.stream(), user_data);
    });
}

TF_API tf_status tf_slot_wait(tf_runtime *rt, int32_t other_slot) {
    static const char op[] = "tf_slot_wait";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (other_slot < 0 || other_slot >= state.slot_count())
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "other_slot %d is outside 0..%d",
                           static_cast<int>(other_slot), state.slot_count() - 1);
        const int mine = tf::handle_slot(rt);
        CUstream other = state.existing_stream(other_slot);
        // Nothing was ever queued there, or it is our own stream: in order already.
        if (!other || other_slot == mine) return TF_OK;
        tf::CallFrame frame(rt);
        tf_status st = frame.enter_slot(mine);
        return st == TF_OK ? tf::wait_for_slot(frame, other_slot) : st;
    });
}

}  // extern "C"
