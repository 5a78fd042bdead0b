// Public page-locked host memory: tf_host_alloc, tf_host_free,
// tf_host_record_use, tf_host_register, tf_host_unregister, tf_host_stats,
// tf_host_trim (the pool: transfer/host_pool.h).
#include <cstddef>

#include "context_guard.h"
#include "runtime_call.h"
#include "struct_io.h"
#include "transfer_common.h"

namespace {

constexpr size_t kStatsMinSize = offsetof(tf_host_pool_stats, bytes_in_use) + sizeof(uint64_t);

// Runs body(pool) with the runtime's primary context current.
template <class Body>
tf_status with_pool(const char *op, tf::RuntimeState &state, Body &&body) {
    tf::ContextScope scope;
    tf_status st = scope.enter(state.api(), state.context(), op);
    if (st != TF_OK) return st;
    return body(state.host_pool());
}

}  // namespace

extern "C" {

TF_API tf_status tf_host_alloc(tf_runtime *rt, size_t bytes, void **out_ptr) {
    static const char op[] = "tf_host_alloc";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out_ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "out_ptr is NULL");
        if (bytes == 0) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "bytes is 0");
        return with_pool(op, state, [&](tf::HostPool &pool) {
            return pool.allocate(state.api(), op, bytes, out_ptr);
        });
    });
}

TF_API tf_status tf_host_free(tf_runtime *rt, void *ptr) {
    static const char op[] = "tf_host_free";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!ptr) return TF_OK;
        return with_pool(op, state,
                         [&](tf::HostPool &pool) { return pool.free(state.api(), op, ptr); });
    });
}

TF_API tf_status tf_host_record_use(tf_runtime *rt, void *ptr) {
    static const char op[] = "tf_host_record_use";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "ptr is NULL");
        tf::ContextScope scope;
        int slot = 0;
        CUstream stream = nullptr;
        tf_status st = tf::enter_slot_stream(op, rt, scope, &slot, &stream);
        if (st != TF_OK) return st;
        return state.host_pool().record_use(op, ptr, slot, stream);
    });
}

TF_API tf_status tf_host_register(tf_runtime *rt, void *ptr, size_t bytes) {
    static const char op[] = "tf_host_register";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "ptr is NULL");
        if (bytes == 0) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "bytes is 0");
        return with_pool(op, state, [&](tf::HostPool &pool) {
            return pool.register_range(state.api(), op, ptr, bytes);
        });
    });
}

TF_API tf_status tf_host_unregister(tf_runtime *rt, void *ptr) {
    static const char op[] = "tf_host_unregister";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "ptr is NULL");
        return with_pool(op, state, [&](tf::HostPool &pool) {
            return pool.unregister_range(state.api(), op, ptr);
        });
    });
}

TF_API tf_status tf_host_trim(tf_runtime *rt) {
    static const char op[] = "tf_host_trim";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        return with_pool(op, state,
                         [&](tf::HostPool &pool) { return pool.trim(state.api(), op); });
    });
}

TF_API void tf_host_pool_stats_init(tf_host_pool_stats *stats, size_t struct_size) {
    tf::init_sized(stats, struct_size, tf_host_pool_stats{});
}

TF_API tf_status tf_host_stats(const tf_runtime *rt, tf_host_pool_stats *out) {
    static const char op[] = "tf_host_stats";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "out is NULL");
        tf_status st = tf::check_struct_size(op, "out", out->struct_size, kStatsMinSize,
                                             "tf_host_pool_stats_init");
        if (st != TF_OK) return st;
        // The pool's lock may be held by a parent thread that does not
        // exist here, and its memory is the parent's.
        if (state.forked()) return state.check_usable(op);
        tf_host_pool_stats s;
        state.host_pool().stats(&s);
        tf::copy_out_sized(out, s);
        return TF_OK;
    });
}

}  // extern "C"
