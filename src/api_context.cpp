// Public context and stream calls: tf_with_context, tf_runtime_stream,
// tf_runtime_slot_stream, tf_runtime_sync.
#include "callback.h"
#include "context_guard.h"
#include "cuda_status.h"
#include "runtime_call.h"
#include "workspace_barrier.h"

namespace {

tf_status slot_stream(const char *op, tf::RuntimeState &state, int slot, void **out) {
    tf::ContextScope scope;
    tf_status st = scope.enter(state.api(), state.context(), op);
    if (st != TF_OK) return st;
    CUstream stream = nullptr;
    if ((st = state.slot_stream(op, slot, &stream)) != TF_OK) return st;
    *out = stream;
    return TF_OK;
}

}  // namespace

extern "C" {

TF_API tf_status tf_with_context(tf_runtime *rt, int32_t (*fn)(void *user_data), void *user_data) {
    static const char op[] = "tf_with_context";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!fn) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "fn is NULL");
        tf::ContextScope scope;
        tf_status st = scope.enter_for_caller_code(state.api(), state.context(), op);
        if (st != TF_OK) return st;
        return tf::invoke_callback(op, fn, user_data);
    });
}

TF_API tf_status tf_runtime_stream(tf_runtime *rt, void **out_stream) {
    static const char op[] = "tf_runtime_stream";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out_stream) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "out_stream is NULL");
        return slot_stream(op, state, tf::handle_slot(rt), out_stream);
    });
}

TF_API tf_status tf_runtime_slot_stream(tf_runtime *rt, int32_t slot, void **out_stream) {
    static const char op[] = "tf_runtime_slot_stream";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out_stream) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "out_stream is NULL");
        if (slot < 0 || slot >= state.slot_count())
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "slot %d is outside 0..%d",
                           static_cast<int>(slot), state.slot_count() - 1);
        return slot_stream(op, state, slot, out_stream);
    });
}

TF_API tf_status tf_runtime_sync(tf_runtime *rt) {
    static const char op[] = "tf_runtime_sync";
    return tf::runtime_call_running_releases(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        CUstream stream = state.existing_stream(tf::handle_slot(rt));
        // Nothing was ever queued on this slot: no wait, and no release to
        // run; leaks found earlier elsewhere are still reported.
        if (!stream) return state.retirements().report_unreported(state.api(), op);
        tf::ContextScope scope;  // the releases after the barrier are caller code
        tf_status st = scope.enter_for_caller_code(state.api(), state.context(), op);
        if (st != TF_OK) return st;
        if ((st = TF_CU(state.api(), op, cuStreamSynchronize, stream)) != TF_OK) return st;
        if (state.host_pool().has_pending()) state.host_pool().poll(state.api());
        return tf::after_barrier(state, op);
    });
}

}  // extern "C"
