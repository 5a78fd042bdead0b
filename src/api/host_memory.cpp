// SPDX-License-Identifier: MIT OR Apache-2.0
// Public page-locked host memory: tf_host_alloc, tf_host_free,
// tf_host_record_use, tf_host_register, tf_host_unregister, tf_host_stats,
// tf_host_trim (the pool: transfer/host_pool.h).
#include <cstddef>

#include "driver/context_scope.h"
#include "api/guard.h"
#include "util/struct_io.h"
#include "runtime/call_frame.h"
#include "runtime/graph_capture.h"
#include "transfer/orphan_blocks.h"

namespace {

constexpr size_t kStatsMinSize = offsetof(tf_host_pool_stats, bytes_in_use) + sizeof(uint64_t);

// Runs body(pool) with the runtime's primary context current.
template <class Body>
tf_status with_pool(tf::RuntimeState &state, Body &&body) {
    tf::CallFrame frame(state);
    tf_status st = frame.enter_context();
    if (st != TF_OK) return st;
    return body(state.host_pool());
}

}  // namespace

extern "C" {

TF_API tf_status tf_host_alloc(tf_runtime *rt, size_t bytes, void **out_ptr) {
    static const char op[] = "tf_host_alloc";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out_ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_ptr is NULL");
        if (bytes == 0) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "bytes is 0");
        return with_pool(
            state, [&](tf::HostPool &pool) { return pool.allocate(state.api(), bytes, out_ptr); });
    });
}

TF_API tf_status tf_host_free(tf_runtime *rt, void *ptr) {
    static const char op[] = "tf_host_free";
    // NULL: a block whose runtime was released (NOTE [blocks outliving
    // their runtime]).
    if (!rt) return tf::guarded(op, [&] { return ptr ? tf::free_orphan_block(ptr) : TF_OK; });
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!ptr) return TF_OK;
        return with_pool(state, [&](tf::HostPool &pool) { return pool.free(state.api(), ptr); });
    });
}

TF_API tf_status tf_host_record_use(tf_runtime *rt, void *ptr) {
    static const char op[] = "tf_host_record_use";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &) -> tf_status {
        if (!ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "ptr is NULL");
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        if (st != TF_OK) return st;
        return tf::note_host_use(frame, ptr);
    });
}

TF_API tf_status tf_host_register(tf_runtime *rt, void *ptr, size_t bytes) {
    static const char op[] = "tf_host_register";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "ptr is NULL");
        if (bytes == 0) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "bytes is 0");
        return with_pool(state, [&](tf::HostPool &pool) {
            return pool.register_range(state.api(), ptr, bytes);
        });
    });
}

TF_API tf_status tf_host_unregister(tf_runtime *rt, void *ptr) {
    static const char op[] = "tf_host_unregister";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "ptr is NULL");
        return with_pool(
            state, [&](tf::HostPool &pool) { return pool.unregister_range(state.api(), ptr); });
    });
}

TF_API tf_status tf_host_trim(tf_runtime *rt) {
    static const char op[] = "tf_host_trim";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        return with_pool(state, [&](tf::HostPool &pool) { return pool.trim(state.api()); });
    });
}

TF_API void tf_host_pool_stats_init(tf_host_pool_stats *stats, size_t struct_size) {
    tf::init_sized(stats, struct_size, tf_host_pool_stats{});
}

TF_API tf_status tf_host_stats(const tf_runtime *rt, tf_host_pool_stats *out) {
    static const char op[] = "tf_host_stats";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
        tf_status st = tf::check_struct_size("out", out->struct_size, kStatsMinSize,
                                             "tf_host_pool_stats_init");
        if (st != TF_OK) return st;
        // The pool's lock may be held by a parent thread that does not
        // exist here, and its memory is the parent's.
        if (state.forked()) return state.check_usable();
        tf_host_pool_stats s;
        state.host_pool().stats(&s);
        tf::copy_out_sized(out, s);
        return TF_OK;
    });
}

}  // extern "C"
