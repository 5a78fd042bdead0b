// SPDX-License-Identifier: MIT OR Apache-2.0
// Public context and stream calls: tf_with_context, tf_runtime_stream,
// tf_runtime_slot_stream, tf_runtime_sync.
#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/barrier.h"
#include "runtime/call_frame.h"
#include "runtime/graph_capture.h"
#include "util/callback.h"

extern "C" {

TF_API tf_status tf_with_context(tf_runtime *rt, int32_t (*fn)(void *user_data), void *user_data) {
    static const char op[] = "tf_with_context";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!fn) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "fn is NULL");
        tf::CallFrame frame(state);
        tf_status st = frame.enter_context(tf::CallerCode::runs);
        if (st != TF_OK) return st;
        return tf::invoke_callback(fn, user_data);
    });
}

TF_API tf_status tf_runtime_stream(tf_runtime *rt, void **out_stream) {
    static const char op[] = "tf_runtime_stream";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &) -> tf_status {
        if (!out_stream) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_stream is NULL");
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        if (st == TF_OK) *out_stream = frame.stream();
        return st;
    });
}

TF_API tf_status tf_runtime_slot_stream(tf_runtime *rt, int32_t slot, void **out_stream) {
    static const char op[] = "tf_runtime_slot_stream";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out_stream) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_stream is NULL");
        if (slot < 0 || slot >= state.slot_count())
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "slot %d is outside 0..%d",
                           static_cast<int>(slot), state.slot_count() - 1);
        tf::CallFrame frame(rt);
        tf_status st = frame.enter_slot(slot);
        if (st == TF_OK) *out_stream = frame.stream();
        return st;
    });
}

TF_API tf_status tf_runtime_sync(tf_runtime *rt) {
    static const char op[] = "tf_runtime_sync";
    return tf::runtime_call_running_releases(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        const int slot = tf::handle_slot(rt);
        CUstream stream = state.existing_stream(slot);
        // Nothing was ever queued on this slot: no wait, and no release to
        // run; leaks found earlier elsewhere are still reported.
        if (!stream) return state.retirements().report_unreported(state.api());
        tf::CallFrame frame(state);  // the releases after the barrier are caller code
        tf_status st = frame.enter_context(tf::CallerCode::runs);
        if (st == TF_OK)
            st = tf::refuse_capture(state, slot, stream, "this call waits for the device");
        if (st != TF_OK) return st;
        if ((st = TF_CU(state.api(), cuStreamSynchronize, stream)) != TF_OK) return st;
        if (state.host_pool().has_pending()) state.host_pool().poll(state.api());
        return tf::after_barrier(state);
    });
}

}  // extern "C"
