// SPDX-License-Identifier: MIT OR Apache-2.0
// Deferred workspace release: tf_workspace_retire, tf_workspace_poll,
// tf_workspace_stats.
#include <cstring>

#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/graph_capture.h"
#include "runtime/retirement_queue.h"
#include "util/struct_io.h"

namespace {

constexpr size_t kStatsMinSize = offsetof(tf_retirement_stats, capacity) + sizeof(uint32_t);

}  // namespace

extern "C" {

TF_API tf_status tf_workspace_retire(tf_runtime *rt, void *resource,
                                     void (*release)(void *resource, void *user_data),
                                     void *user_data) {
    static const char op[] = "tf_workspace_retire";
    return tf::runtime_call_running_releases(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!release) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "release is NULL");
        tf::CallFrame frame(rt);
        // Releases of earlier retirements run inside: caller code.
        tf_status st = frame.enter(tf::CallerCode::runs);
        if (st == TF_OK)
            st = frame.refuse_capture(
                "a release queued here would not wait for the launches of the graph");
        if (st != TF_OK) return st;
        return state.retirements().retire(
            state.api(), state.slot_count(), state.options().retirement_capacity, frame.slot(),
            frame.stream(), tf::Retirement{resource, release, user_data});
    });
}

TF_API tf_status tf_workspace_poll(tf_runtime *rt) {
    static const char op[] = "tf_workspace_poll";
    return tf::runtime_call_running_releases(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        tf::CallFrame frame(state);  // the releases it finds are caller code
        tf_status st = frame.enter_context(tf::CallerCode::runs);
        const int slot = tf::handle_slot(rt);
        if (st == TF_OK && state.existing_stream(slot))
            st = tf::refuse_capture(state, slot, state.existing_stream(slot),
                                    "this call may wait for the device");
        if (st != TF_OK) return st;
        return state.retirements().poll(state.api());
    });
}

TF_API void tf_retirement_stats_init(tf_retirement_stats *stats, size_t struct_size) {
    tf::init_sized(stats, struct_size, tf_retirement_stats{});
}

TF_API tf_status tf_workspace_stats(const tf_runtime *rt, tf_retirement_stats *out) {
    static const char op[] = "tf_workspace_stats";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
        tf_status st = tf::check_struct_size("out", out->struct_size, kStatsMinSize,
                                             "tf_retirement_stats_init");
        if (st != TF_OK) return st;
        tf_retirement_stats s;
        if (!state.retirements().stats(state.options().retirement_capacity, state.forked(), &s))
            return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                           "this process was forked while another thread held the runtime's "
                           "retirement lock; its counters cannot be read here");
        tf::copy_out_sized(out, s);
        return TF_OK;
    });
}

}  // extern "C"
