// SPDX-License-Identifier: MIT OR Apache-2.0
// Public device memory calls: tf_alloc, tf_free and the device pool's
// tf_memory_stats, tf_memory_reset_peak, tf_memory_trim,
// tf_memory_record_use (runtime/device_pool.h).
#include <cstddef>

#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/device_pool.h"
#include "runtime/graph_capture.h"
#include "runtime/graph_memory.h"
#include "transfer/device_range.h"
#include "util/struct_io.h"

namespace {

constexpr size_t kStatsMinSize = offsetof(tf_memory_pool_stats, in_use_bytes) + sizeof(uint64_t);

// tf_free of an address that starts no allocation of the device's pool: the
// library did not make it (or its pool is gone), so the driver says whether
// it may be freed.
tf_status free_unknown(const tf::CallFrame &frame, uint64_t ptr) {
    tf::RuntimeState &state = frame.state();
    tf::GraphAddress graph;
    if (state.device_pool().graph_addresses().find(ptr, &graph))
        return tf::fail_graph_address("ptr", ptr,
                                      "the graph frees it at each launch; tf_free outside "
                                      "its capture does not");
    tf_status st = tf::check_device_range(state, "ptr", ptr, 0);
    bool cached = false;
    if (st == TF_OK) st = tf::memory_pools_supported(state, &cached);
    if (st != TF_OK) return st;
    const tf::DriverApi &api = state.api();
    const char *call = cached ? "cuMemFreeAsync" : "cuMemFree";
    if (cached ? !api.cuMemFreeAsync : !api.cuMemFree) return tf::fail_missing(call);
    CUresult r = cached ? api.cuMemFreeAsync(ptr, frame.stream()) : api.cuMemFree(ptr);
    if (r == CUDA_ERROR_INVALID_VALUE) return tf::fail_not_start(call, ptr, r);
    return tf::check_cuda(api, call, r);
}

}  // namespace

extern "C" {

TF_API tf_status tf_alloc(tf_runtime *rt, size_t bytes, uint64_t *out_ptr) {
    static const char op[] = "tf_alloc";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out_ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_ptr is NULL");
        if (bytes == 0) {
            *out_ptr = 0;
            return TF_OK;
        }
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        if (st != TF_OK) return st;
        if (state.gate(frame.slot()).capturing()) return tf::capture_alloc(frame, bytes, out_ptr);
        return state.device_pool().allocate(state.api(), frame.stream(), bytes, out_ptr);
    });
}

TF_API tf_status tf_free(tf_runtime *rt, uint64_t ptr) {
    static const char op[] = "tf_free";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (ptr == 0) return TF_OK;
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        if (st != TF_OK) return st;
        if (state.gate(frame.slot()).capturing()) return tf::capture_free(frame, ptr);
        bool handled = false;
        st = state.device_pool().free(state.api(), state, frame.slot(), frame.stream(), ptr,
                                      &handled);
        return handled ? st : free_unknown(frame, ptr);
    });
}

TF_API void tf_memory_pool_stats_init(tf_memory_pool_stats *stats, size_t struct_size) {
    tf::init_sized(stats, struct_size, tf_memory_pool_stats{});
}

TF_API tf_status tf_memory_stats(const tf_runtime *rt, tf_memory_pool_stats *out) {
    static const char op[] = "tf_memory_stats";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
        tf_status st = tf::check_struct_size("out", out->struct_size, kStatsMinSize,
                                             "tf_memory_pool_stats_init");
        if (st == TF_OK) st = state.check_usable();
        // Pool attributes need no context; the driver is asked in the
        // primary context all the same, as every other call does.
        tf::CallFrame frame(state);
        if (st == TF_OK) st = frame.enter_context();
        if (st != TF_OK) return st;
        tf_memory_pool_stats s{};
        if ((st = state.device_pool().stats(state.api(), &s)) != TF_OK) return st;
        tf::copy_out_sized(out, s);
        return TF_OK;
    });
}

TF_API tf_status tf_memory_reset_peak(tf_runtime *rt) {
    static const char op[] = "tf_memory_reset_peak";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        tf::CallFrame frame(state);
        tf_status st = frame.enter_context();
        return st == TF_OK ? state.device_pool().reset_peak(state.api()) : st;
    });
}

TF_API tf_status tf_memory_trim(tf_runtime *rt, uint64_t keep_bytes) {
    static const char op[] = "tf_memory_trim";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        tf::CallFrame frame(state);
        tf_status st = frame.enter_context();
        if (st != TF_OK) return st;
        return state.device_pool().trim(state.api(), keep_bytes);
    });
}

TF_API tf_status tf_memory_record_use(tf_runtime *rt, uint64_t ptr) {
    static const char op[] = "tf_memory_record_use";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (ptr == 0) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "ptr is 0");
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        if (st != TF_OK) return st;
        return state.device_pool().record_use(state, frame.slot(), ptr);
    });
}

}  // extern "C"
