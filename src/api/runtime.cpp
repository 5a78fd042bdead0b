// SPDX-License-Identifier: MIT OR Apache-2.0
// Public runtime lifecycle and queries.
#include <cstring>

#include "api/guard.h"
#include "runtime/runtime_handle.h"
#include "runtime/runtime_state.h"
#include "transfer/transfer_options.h"
#include "util/struct_io.h"

namespace {

constexpr size_t kOptionsMinSize = offsetof(tf_runtime_options, stream_slots) + sizeof(uint32_t);
constexpr size_t kDeviceInfoMinSize = offsetof(tf_device_properties, ordinal) + sizeof(int32_t);

// Validates a caller's options into `out` (which starts at the defaults).
tf_status read_options(const tf_runtime_options *in, tf::RuntimeOptions *out) {
    if (!in) return TF_OK;
    tf_status st = tf::check_struct_size("options", in->struct_size, kOptionsMinSize,
                                         "tf_runtime_options_init");
    if (st != TF_OK) return st;
    tf_runtime_options opts;
    tf_runtime_options_init(&opts, sizeof opts);
    if (!tf::copy_in_sized(in, &opts))
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "options set fields this library (version %s) does not know",
                       TF_VERSION_STRING);
    if (opts.stream_slots < 1 || opts.stream_slots > TF_MAX_STREAM_SLOTS)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "stream_slots %u is outside 1..%d",
                       static_cast<unsigned>(opts.stream_slots), TF_MAX_STREAM_SLOTS);
    if (opts.retirement_capacity < 1 || opts.retirement_capacity > TF_MAX_RETIREMENT_CAPACITY)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "retirement_capacity %u is outside 1..%d",
                       static_cast<unsigned>(opts.retirement_capacity), TF_MAX_RETIREMENT_CAPACITY);
    if (opts.flags != 0)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "flags 0x%x: no flag is defined",
                       static_cast<unsigned>(opts.flags));
    const uint64_t limit = opts.memory_reserved_limit;
    if (limit != 0 && limit < TF_MIN_MEMORY_RESERVED_LIMIT)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "memory_reserved_limit %llu is below TF_MIN_MEMORY_RESERVED_LIMIT "
                       "(%llu, the driver's granularity); 0 means no limit",
                       static_cast<unsigned long long>(limit),
                       static_cast<unsigned long long>(TF_MIN_MEMORY_RESERVED_LIMIT));
    out->stream_slots = opts.stream_slots;
    out->cublas_workspace_bytes = opts.cublas_workspace_bytes;
    out->retirement_capacity = opts.retirement_capacity;
    out->memory_release_threshold = opts.memory_release_threshold;
    out->memory_reserved_limit = limit;
    return tf::read_transfer_options(opts, out);
}

// Both constructors: each reports failures under its own name.
tf_status create_runtime(const char *op, int32_t ordinal, const tf_runtime_options *options,
                         tf_runtime **out) {
    return tf::guarded(op, [&]() -> tf_status {
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
        tf::RuntimeOptions opts;
        tf_status st = read_options(options, &opts);
        if (st != TF_OK) return st;
        std::shared_ptr<tf::RuntimeState> state;
        if ((st = tf::RuntimeState::create(ordinal, opts, &state)) != TF_OK) return st;
        *out = tf::make_handle(std::move(state), -1);
        return TF_OK;
    });
}

#define TF_REQUIRE_OUT(ptr) \
    if (!(ptr)) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "%s is NULL", #ptr)

}  // namespace

extern "C" {

TF_API void tf_runtime_options_init(tf_runtime_options *options, size_t struct_size) {
    tf_runtime_options d;
    std::memset(&d, 0, sizeof d);
    d.stream_slots = TF_DEFAULT_STREAM_SLOTS;
    d.cublas_workspace_bytes = TF_DEFAULT_CUBLAS_WORKSPACE_BYTES;
    d.retirement_capacity = TF_DEFAULT_RETIREMENT_CAPACITY;
    tf::init_sized(options, struct_size, d);
}

TF_API tf_status tf_runtime_new_with_options(int32_t ordinal, const tf_runtime_options *options,
                                             tf_runtime **out) {
    return create_runtime("tf_runtime_new_with_options", ordinal, options, out);
}

TF_API tf_status tf_runtime_new(int32_t ordinal, tf_runtime **out) {
    return create_runtime("tf_runtime_new", ordinal, nullptr, out);
}

TF_API tf_status tf_runtime_retain(tf_runtime *rt) {
    static const char op[] = "tf_runtime_retain";
    return tf::retain_handle(op, rt, tf::kRuntimeKind);
}

TF_API tf_status tf_runtime_release(tf_runtime *rt) {
    static const char op[] = "tf_runtime_release";
    if (!rt) return TF_OK;
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &) -> tf_status {
        tf::release_runtime(rt);
        return TF_OK;
    });
}

TF_API tf_status tf_runtime_bind_slot(tf_runtime *rt, int32_t slot, tf_runtime **out) {
    static const char op[] = "tf_runtime_bind_slot";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        TF_REQUIRE_OUT(out);
        if (slot < 0 || slot >= state.slot_count())
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "slot %d is outside 0..%d",
                           static_cast<int>(slot), state.slot_count() - 1);
        *out = tf::make_handle(rt->state, slot);
        return TF_OK;
    });
}

TF_API tf_status tf_runtime_identity(const tf_runtime *rt, uint64_t *out) {
    static const char op[] = "tf_runtime_identity";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        TF_REQUIRE_OUT(out);
        *out = state.identity();
        return TF_OK;
    });
}

TF_API tf_status tf_runtime_allocation_domain(const tf_runtime *rt, uint64_t *out) {
    static const char op[] = "tf_runtime_allocation_domain";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        TF_REQUIRE_OUT(out);
        *out = state.allocation_domain();
        return TF_OK;
    });
}

TF_API tf_status tf_runtime_device_info(const tf_runtime *rt, tf_device_properties *out) {
    static const char op[] = "tf_runtime_device_info";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        TF_REQUIRE_OUT(out);
        tf_status st = tf::check_struct_size("out", out->struct_size, kDeviceInfoMinSize,
                                             "tf_device_properties_init");
        if (st != TF_OK) return st;
        tf::copy_out_sized(out, state.info());
        return TF_OK;
    });
}

TF_API tf_status tf_runtime_primary_context(const tf_runtime *rt, void **out_context) {
    static const char op[] = "tf_runtime_primary_context";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        TF_REQUIRE_OUT(out_context);
        *out_context = state.context();
        return TF_OK;
    });
}

TF_API tf_status tf_runtime_slot_count(const tf_runtime *rt, int32_t *out_count) {
    static const char op[] = "tf_runtime_slot_count";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        TF_REQUIRE_OUT(out_count);
        *out_count = state.slot_count();
        return TF_OK;
    });
}

TF_API tf_status tf_runtime_current_slot(const tf_runtime *rt, int32_t *out_slot) {
    static const char op[] = "tf_runtime_current_slot";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &) -> tf_status {
        TF_REQUIRE_OUT(out_slot);
        *out_slot = tf::handle_slot(rt);
        return TF_OK;
    });
}

}  // extern "C"
