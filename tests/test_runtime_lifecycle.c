/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tf_runtime_new / retain / release / bind_slot and the runtime queries. */
#include <stdio.h>
#include <string.h>

#include "support/test_support.h"

static void create_and_release(void **state) {
    tf_runtime *rt = NULL;
    (void)state;
    assert_ok(tf_runtime_new(0, &rt));
    assert_non_null(rt);
    if (tfd()) assert_int_equal(tfd()->tfd_primary_refcount(0), 1);
    assert_null(raw_current_context()); /* creation leaves the thread as it was */
    assert_ok(tf_runtime_release(rt));
    if (tfd()) assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
}

/* Order: init driver, get device, retain the primary context, describe. */
static void creation_order_and_no_stream_yet(void **state) {
    tf_runtime *rt = NULL;
    char log[1024];
    (void)state;
    REQUIRE_DOUBLE();
    assert_ok(tf_runtime_new(0, &rt));
    tfd()->tfd_log_format(log, sizeof log, 0);
    {
        const char *get = strstr(log, "cuDeviceGet,");
        const char *retain = strstr(log, "cuDevicePrimaryCtxRetain");
        const char *name = strstr(log, "cuDeviceGetName");
        assert_non_null(get);
        assert_non_null(retain);
        assert_non_null(name);
        assert_true(get < retain && retain < name);
    }
    assert_null(strstr(log, "cuStreamCreate"));
    assert_null(strstr(log, "cuCtxSetCurrent"));
    assert_int_equal(tfd()->tfd_live(TFD_STREAMS), 0);
    assert_ok(tf_runtime_release(rt));
}

static void options_defaults_and_limits(void **state) {
    tf_runtime_options o;
    tf_runtime *rt = NULL;
    int32_t n = 0;
    (void)state;
    tf_runtime_options_init(&o, sizeof o);
    assert_int_equal(o.struct_size, sizeof o);
    assert_int_equal(o.stream_slots, TF_DEFAULT_STREAM_SLOTS);
    assert_true(o.cublas_workspace_bytes == TF_DEFAULT_CUBLAS_WORKSPACE_BYTES);
    assert_int_equal(o.retirement_capacity, TF_DEFAULT_RETIREMENT_CAPACITY);
    assert_int_equal(o.flags, 0);
    tf_runtime_options_init(NULL, 0);

    o.stream_slots = 0;
    assert_failure(tf_runtime_new_with_options(0, &o, &rt), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "stream_slots 0");
    o.stream_slots = TF_MAX_STREAM_SLOTS + 1;
    assert_failure(tf_runtime_new_with_options(0, &o, &rt), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "stream_slots 257");
    o.stream_slots = 0xFFFFFFFFu;
    assert_failure(tf_runtime_new_with_options(0, &o, &rt), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "outside 1..256");
    tf_runtime_options_init(&o, sizeof o);
    o.retirement_capacity = 0;
    assert_failure(tf_runtime_new_with_options(0, &o, &rt), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "retirement_capacity 0");
    tf_runtime_options_init(&o, sizeof o);
    o.flags = 4;
    assert_failure(tf_runtime_new_with_options(0, &o, &rt), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "flags");
    tf_runtime_options_init(&o, sizeof o);
    o.struct_size = 3;
    assert_failure(tf_runtime_new_with_options(0, &o, &rt), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "struct_size 3");
    assert_null(rt);

    tf_runtime_options_init(&o, sizeof o);
    o.stream_slots = TF_MAX_STREAM_SLOTS;
    assert_ok(tf_runtime_new_with_options(0, &o, &rt));
    assert_ok(tf_runtime_slot_count(rt, &n));
    assert_int_equal(n, TF_MAX_STREAM_SLOTS);
    assert_ok(tf_runtime_release(rt));
}

/* An older caller's shorter struct gets defaults for the rest; a newer
 * caller's longer struct is accepted only if the unknown tail is zero. */
static void options_struct_size_is_versioned(void **state) {
    unsigned char buf[sizeof(tf_runtime_options) + 8];
    tf_runtime_options *o = (tf_runtime_options *)buf;
    tf_runtime *rt = NULL;
    int32_t n = 0;
    (void)state;
    memset(buf, 0, sizeof buf);
    tf_runtime_options_init(o, sizeof *o);
    o->stream_slots = 3;
    o->struct_size = (uint32_t)(offsetof(tf_runtime_options, stream_slots) + sizeof(uint32_t));
    o->retirement_capacity = 0; /* beyond struct_size: ignored, default used */
    assert_ok(tf_runtime_new_with_options(0, o, &rt));
    assert_ok(tf_runtime_slot_count(rt, &n));
    assert_int_equal(n, 3);
    assert_ok(tf_runtime_release(rt));

    tf_runtime_options_init(o, sizeof *o);
    o->struct_size = sizeof buf;
    assert_ok(tf_runtime_new_with_options(0, o, &rt));
    assert_ok(tf_runtime_release(rt));
    buf[sizeof(tf_runtime_options) + 3] = 1;
    assert_failure(tf_runtime_new_with_options(0, o, &rt), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "does not know");
}

static void ordinal_errors_list_the_devices(void **state) {
    tf_runtime *rt = NULL;
    int32_t n = 0;
    char found[64], missing[64];
    (void)state;
    assert_ok(tf_device_count(&n));
    /* "found 1 device: 0 \"..." or "found 2 devices: 0 \"...", whatever this machine has. */
    snprintf(found, sizeof found, "found %d device%s: 0 \"", (int)n, n == 1 ? "" : "s");
    snprintf(missing, sizeof missing, "device %d is not available", (int)n + 6);
    assert_failure(tf_runtime_new(-1, &rt), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_new",
                   "device ordinal -1 is negative", found);
    assert_failure(tf_runtime_new(n + 6, &rt), TF_ERROR_DEVICE_UNAVAILABLE, "tf_runtime_new",
                   missing, found, "GPU-");
    assert_string_equal(tf_last_error_call(), "cuDeviceGet");
    assert_failure(tf_runtime_new(0x7fffffff, &rt), TF_ERROR_DEVICE_UNAVAILABLE, "tf_runtime_new",
                   "not available");
    assert_null(rt);
    assert_failure(tf_runtime_new(0, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_new",
                   "out is NULL");
}

static void ordinal_error_lists_several_devices(void **state) {
    tf_runtime *rt = NULL;
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_devices(3);
    assert_failure(tf_runtime_new(3, &rt), TF_ERROR_DEVICE_UNAVAILABLE, "tf_runtime_new",
                   "found 3 devices: 0 \"tenferro double device 0\"",
                   "2 \"tenferro double device 2\"");
    assert_ok(tf_runtime_new(2, &rt));
    assert_ok(tf_runtime_release(rt));
}

/* Every step of creation failing: the status, the call, and no retain left. */
static void creation_failures_release_the_primary_context(void **state) {
    static const struct {
        const char *entry;
        int code;
        tf_status expected;
    } steps[] = {
        {"cuDeviceGet", CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA},
        {"cuDevicePrimaryCtxRetain", CUDA_ERROR_OUT_OF_MEMORY, TF_ERROR_OUT_OF_MEMORY},
        {"cuDeviceGetName", CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA},
        {"cuDeviceGetUuid", CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA},
        {"cuDeviceTotalMem", CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA},
        {"cuDeviceGetAttribute", CUDA_ERROR_INVALID_VALUE, TF_ERROR_CUDA},
    };
    size_t i;
    (void)state;
    REQUIRE_DOUBLE();
    for (i = 0; i < sizeof steps / sizeof steps[0]; ++i) {
        tf_runtime *rt = NULL;
        tfd()->tfd_clear_faults();
        INJECT(steps[i].entry, 1, steps[i].code, 1);
        assert_failure(tf_runtime_new(0, &rt), steps[i].expected, "tf_runtime_new", steps[i].entry);
        assert_string_equal(tf_last_error_call(), steps[i].entry);
        assert_int_equal(tf_last_error_code(), steps[i].code);
        assert_null(rt);
        assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
        assert_null(raw_current_context());
    }
}

static void init_failures_are_told_apart(void **state) {
    tf_runtime *rt = NULL;
    (void)state;
    REQUIRE_DOUBLE();
    /* cuInit already succeeded in this process: later calls do not repeat
     * it, so the stub and no-device cases run in fresh processes
     * (test_driver_loading).  Here: device lookup on a driver reporting an
     * unavailable device. */
    INJECT("cuDeviceGet", 1, CUDA_ERROR_DEVICE_UNAVAILABLE, 1);
    assert_failure(tf_runtime_new(0, &rt), TF_ERROR_DEVICE_UNAVAILABLE, "tf_runtime_new",
                   "CUDA_ERROR_DEVICE_UNAVAILABLE (46)");
}

static void identity_is_fresh_per_new_and_shared_by_clones(void **state) {
    tf_runtime *a = new_runtime(), *b = new_runtime(), *bound = NULL;
    uint64_t ia = 0, ib = 0, ia2 = 0, ibound = 0, da = 0, db = 0, dbound = 0;
    (void)state;
    assert_ok(tf_runtime_identity(a, &ia));
    assert_ok(tf_runtime_identity(b, &ib));
    assert_true(ia != 0 && ib != 0 && ia != ib);
    assert_ok(tf_runtime_retain(a));
    assert_ok(tf_runtime_identity(a, &ia2));
    assert_true(ia == ia2);
    assert_ok(tf_runtime_bind_slot(a, 1, &bound));
    assert_ok(tf_runtime_identity(bound, &ibound));
    assert_true(ibound == ia);
    assert_ok(tf_runtime_allocation_domain(a, &da));
    assert_ok(tf_runtime_allocation_domain(b, &db));
    assert_ok(tf_runtime_allocation_domain(bound, &dbound));
    assert_true(da != db && da == dbound);
    assert_true(da != ia && da != ib && db != ia && db != ib);
    assert_ok(tf_runtime_release(bound));
    assert_ok(tf_runtime_release(a));
    assert_ok(tf_runtime_release(a));
    assert_ok(tf_runtime_release(b));
}

static void retain_counts_until_last_release(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t id = 0;
    (void)state;
    assert_ok(tf_runtime_retain(rt));
    assert_ok(tf_runtime_retain(rt));
    assert_ok(tf_runtime_release(rt));
    assert_ok(tf_runtime_release(rt));
    if (tfd()) assert_int_equal(tfd()->tfd_primary_refcount(0), 1);
    assert_ok(tf_runtime_identity(rt, &id)); /* still alive */
    assert_ok(tf_runtime_release(rt));
    if (tfd()) assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    assert_ok(tf_runtime_release(NULL)); /* no-op */
}

/* A bound handle keeps the state alive after the original is released. */
static void bound_handle_keeps_runtime_alive(void **state) {
    tf_runtime *rt = new_runtime(), *bound = NULL, *rebound = NULL;
    int32_t slot = -1;
    void *s1 = NULL, *s2 = NULL;
    (void)state;
    assert_ok(tf_runtime_bind_slot(rt, 5, &bound));
    assert_ok(tf_runtime_current_slot(bound, &slot));
    assert_int_equal(slot, 5);
    assert_ok(tf_runtime_release(rt));
    if (tfd()) assert_int_equal(tfd()->tfd_primary_refcount(0), 1);
    assert_ok(tf_runtime_stream(bound, &s1));
    assert_ok(tf_runtime_bind_slot(bound, 2, &rebound));
    assert_ok(tf_runtime_current_slot(rebound, &slot));
    assert_int_equal(slot, 2);
    assert_ok(tf_runtime_slot_stream(rebound, 5, &s2));
    assert_ptr_equal(s1, s2);
    assert_ok(tf_runtime_release(bound));
    assert_ok(tf_runtime_release(rebound));
    if (tfd()) assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
}

/* A released handle is recognised as long as it is among the last 4096
 * released handles of every kind together (docs/bad-input.md): a runtime
 * handle and an event released first are still told apart from garbage
 * after 4094 more releases. */
enum { QUARANTINE = 4096 };

static void released_handles_are_recognised_for_4096_releases(void **state) {
    tf_runtime *rt = new_runtime(), *bound = NULL;
    tf_event *first = NULL, *e = NULL;
    int32_t done = 0;
    int i;
    (void)state;
    assert_ok(tf_runtime_bind_slot(rt, 1, &bound));
    assert_ok(tf_event_new(rt, &first));
    assert_ok(tf_runtime_release(bound));
    assert_ok(tf_event_release(first));
    for (i = 2; i < QUARANTINE; ++i) {
        assert_ok(tf_event_new(rt, &e));
        assert_ok(tf_event_release(e));
    }
    assert_failure(tf_runtime_retain(bound), TF_ERROR_INVALID_HANDLE, "tf_runtime_retain",
                   "was already released");
    assert_failure(tf_event_query(first, &done), TF_ERROR_INVALID_HANDLE, "tf_event_query",
                   "was already released");
    assert_failure(tf_event_query(e, &done), TF_ERROR_INVALID_HANDLE, "tf_event_query",
                   "was already released");
    assert_ok(tf_runtime_release(rt));
}

static void bind_slot_refuses_bad_slots(void **state) {
    tf_runtime *rt = new_runtime_with_slots(4), *bound = NULL;
    (void)state;
    assert_failure(tf_runtime_bind_slot(rt, 4, &bound), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_bind_slot", "slot 4 is outside 0..3");
    assert_failure(tf_runtime_bind_slot(rt, -1, &bound), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_bind_slot", "slot -1");
    assert_failure(tf_runtime_bind_slot(rt, 0, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_bind_slot", "out is NULL");
    assert_null(bound);
    assert_ok(tf_runtime_release(rt));
}

static void queries_describe_the_runtime(void **state) {
    tf_runtime *rt = new_runtime_with_slots(3);
    tf_device_properties a, b;
    void *ctx = NULL;
    int32_t n = 0, v = -1;
    (void)state;
    tf_device_properties_init(&a, sizeof a);
    tf_device_properties_init(&b, sizeof b);
    assert_ok(tf_runtime_device_info(rt, &a));
    assert_ok(tf_device_info(0, &b));
    assert_memory_equal(&a, &b, sizeof a);
    assert_ok(tf_runtime_primary_context(rt, &ctx));
    assert_non_null(ctx);
    if (tfd()) assert_ptr_equal(ctx, tfd()->tfd_primary_context(0));
    assert_ok(tf_runtime_slot_count(rt, &n));
    assert_int_equal(n, 3);
    assert_ok(tf_runtime_current_slot(rt, &v));
    assert_true(v >= 0 && v < 3);
    assert_ok(tf_runtime_supports(rt, TF_CAP_RAW_STREAM, &v));
    assert_int_equal(v, 1);
    assert_ok(tf_runtime_supports(rt, TF_CAP_PEER_COPY, &v));
    assert_int_equal(v, 0); /* asked per pair of devices instead */
    assert_ok(tf_runtime_supports(rt, TF_CAP_NATIVE_MODULES, &v));
    assert_int_equal(v, 1);
    assert_ok(tf_runtime_supports(rt, 9999, &v));
    assert_int_equal(v, 0); /* unknown capabilities are not supported */
    assert_ok(tf_runtime_supports(rt, -3, &v));
    assert_int_equal(v, 0);
    assert_ok(tf_runtime_release(rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(create_and_release),
        TF_TEST(creation_order_and_no_stream_yet),
        TF_TEST(options_defaults_and_limits),
        TF_TEST(options_struct_size_is_versioned),
        TF_TEST(ordinal_errors_list_the_devices),
        TF_TEST(ordinal_error_lists_several_devices),
        TF_TEST(creation_failures_release_the_primary_context),
        TF_TEST(init_failures_are_told_apart),
        TF_TEST(identity_is_fresh_per_new_and_shared_by_clones),
        TF_TEST(retain_counts_until_last_release),
        TF_TEST(bound_handle_keeps_runtime_alive),
        TF_TEST(released_handles_are_recognised_for_4096_releases),
        TF_TEST(bind_slot_refuses_bad_slots),
        TF_TEST(queries_describe_the_runtime),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
