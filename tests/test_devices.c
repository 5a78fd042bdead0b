/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tf_device_count, tf_device_info, tf_gpu_available: describing devices
 * creates no context and fails without partial results. */
#include <stdio.h>
#include <string.h>

#include "support/test_support.h"

static void count_and_describe(void **state) {
    int32_t n = 0, i;
    (void)state;
    assert_ok(tf_device_count(&n));
    assert_true(n >= 1);
    for (i = 0; i < n; ++i) {
        tf_device_properties p;
        static const uint8_t zero[16];
        tf_device_properties_init(&p, sizeof p);
        assert_ok(tf_device_info(i, &p));
        assert_int_equal(p.struct_size, sizeof p);
        assert_int_equal(p.ordinal, i);
        assert_true(strlen(p.name) > 0);
        assert_true(memcmp(p.uuid, zero, 16) != 0);
        assert_true(p.compute_capability_major >= 5);
        assert_true(p.total_memory_bytes > 0);
        assert_true(p.multiprocessor_count > 0);
    }
    assert_int_equal(tf_gpu_available(), 1);
}

static void double_devices_are_described_exactly(void **state) {
    tf_device_properties p;
    int32_t n = 0;
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_devices(3);
    assert_ok(tf_device_count(&n));
    assert_int_equal(n, 3);
    tf_device_properties_init(&p, sizeof p);
    assert_ok(tf_device_info(2, &p));
    assert_string_equal(p.name, "tenferro double device 2");
    assert_int_equal(p.compute_capability_major, 9);
    assert_int_equal(p.compute_capability_minor, 0);
    assert_int_equal(p.multiprocessor_count, 132);
    assert_true(p.total_memory_bytes == (uint64_t)80 << 30);
}

/* No primary context is retained or made current by discovery. */
static void discovery_creates_no_context(void **state) {
    tf_device_properties p;
    int32_t n = 0;
    char log[2048];
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_devices(2);
    tf_device_properties_init(&p, sizeof p);
    assert_ok(tf_device_count(&n));
    assert_ok(tf_device_info(1, &p));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_null(strstr(log, "cuDevicePrimaryCtxRetain"));
    assert_null(strstr(log, "cuCtxSetCurrent"));
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    assert_int_equal(tfd()->tfd_primary_refcount(1), 0);
    assert_null(raw_current_context());
}

/* Each query failing: its status, message, and an untouched output. */
static void query_failures_leave_output_untouched(void **state) {
    static const char *const entries[] = {"cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid",
                                          "cuDeviceTotalMem", "cuDeviceGetAttribute"};
    size_t i;
    (void)state;
    REQUIRE_DOUBLE();
    for (i = 0; i < sizeof entries / sizeof entries[0]; ++i) {
        tf_device_properties p, before;
        tf_device_properties_init(&p, sizeof p);
        memset((char *)&p + sizeof p.struct_size, 0xAB, sizeof p - sizeof p.struct_size);
        before = p;
        tfd()->tfd_clear_faults();
        INJECT(entries[i], 1, CUDA_ERROR_UNKNOWN, 1);
        assert_failure(tf_device_info(0, &p), TF_ERROR_CUDA, "tf_device_info", entries[i],
                       "CUDA_ERROR_UNKNOWN (999)");
        assert_string_equal(tf_last_error_call(), entries[i]);
        assert_memory_equal(&p, &before, sizeof p);
    }
    tfd()->tfd_clear_faults();
    INJECT("cuDeviceGetCount", 1, CUDA_ERROR_UNKNOWN, 1);
    {
        int32_t n = 77;
        assert_failure(tf_device_count(&n), TF_ERROR_CUDA, "tf_device_count", "cuDeviceGetCount");
        assert_int_equal(n, 77);
    }
}

static void bad_arguments(void **state) {
    tf_device_properties p;
    (void)state;
    assert_failure(tf_device_count(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_device_count", "NULL");
    assert_failure(tf_device_info(0, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_device_info", "NULL");
    memset(&p, 0, sizeof p);
    assert_failure(tf_device_info(0, &p), TF_ERROR_INVALID_ARGUMENT, "tf_device_info",
                   "struct_size 0", "tf_device_properties_init");
    tf_device_properties_init(&p, sizeof p);
    assert_failure(tf_device_info(-2, &p), TF_ERROR_INVALID_ARGUMENT, "tf_device_info",
                   "-2 is negative", "found ");
    assert_failure(tf_device_info(64, &p), TF_ERROR_DEVICE_UNAVAILABLE, "tf_device_info",
                   "device 64 is not available", "found ");
    tf_device_properties_init(NULL, 0);
}

/* An older caller's smaller struct: only its fields are written. */
static void smaller_struct_gets_only_what_fits(void **state) {
    unsigned char buf[sizeof(tf_device_properties)];
    tf_device_properties *p = (tf_device_properties *)buf;
    const size_t small = offsetof(tf_device_properties, uuid);
    (void)state;
    memset(buf, 0xCD, sizeof buf);
    p->struct_size = (uint32_t)small;
    assert_ok(tf_device_info(0, p));
    assert_int_equal(p->struct_size, small);
    assert_int_equal(p->ordinal, 0);
    assert_true(strlen(p->name) > 0);
    assert_int_equal(buf[small], 0xCD);
    assert_int_equal(buf[sizeof buf - 1], 0xCD);
}

static void gpu_available_keeps_last_error(void **state) {
    (void)state;
    assert_int_equal(tf_runtime_retain(NULL), TF_ERROR_INVALID_ARGUMENT);
    assert_int_equal(tf_gpu_available(), 1);
    assert_int_equal(tf_last_error_status(), TF_ERROR_INVALID_ARGUMENT);
    assert_string_equal(tf_last_error_operation(), "tf_runtime_retain");
}

static void gpu_available_is_zero_without_devices(void **state) {
    int32_t n = 5;
    tf_runtime *rt = NULL;
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_devices(0);
    assert_int_equal(tf_gpu_available(), 0);
    assert_ok(tf_device_count(&n));
    assert_int_equal(n, 0);
    assert_failure(tf_runtime_new(0, &rt), TF_ERROR_DEVICE_UNAVAILABLE, "tf_runtime_new",
                   "found no devices");
}

static void gpu_available_is_zero_when_runtime_fails(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    INJECT("cuDevicePrimaryCtxRetain", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_int_equal(tf_gpu_available(), 0);
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
}

/* The probe goes all the way: a stream is made and synchronized. */
static void gpu_available_is_zero_when_sync_fails(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_int_equal(tf_gpu_available(), 0);
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    assert_int_equal(tfd()->tfd_live(TFD_STREAMS), 0);
    assert_int_equal(tf_gpu_available(), 1);
}

/* The probe is a runtime like any other: a teardown that cannot prove its
 * stream idle leaks what hangs off it and logs that, and the answer is 0. */
static void gpu_available_logs_what_its_teardown_leaks(void **state) {
    const char *log;
    (void)state;
    REQUIRE_DOUBLE();
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 2); /* the probe's and teardown's */
    log_capture_start();
    assert_int_equal(tf_gpu_available(), 0);
    log = log_capture_stop();
    assert_non_null(strstr(log, "cuStreamSynchronize of slot 0 failed"));
    assert_non_null(strstr(log, "leaking every stream"));
    assert_int_equal(tfd()->tfd_calls("cuStreamDestroy"), 0);
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
}

/* A successful call never changes the thread's last error, also when a
 * step inside it failed and the call answered anyway. */
static void set_known_error(void) {
    if (tf_runtime_retain(NULL) != TF_ERROR_INVALID_ARGUMENT) abort();
}

static int known_error_is_kept(void) {
    return tf_last_error_status() == TF_ERROR_INVALID_ARGUMENT &&
           strcmp(tf_last_error_operation(), "tf_runtime_retain") == 0 &&
           strcmp(tf_last_error_call(), "") == 0;
}

static void gpu_available_failed_probe_keeps_last_error(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    set_known_error();
    INJECT("cuDevicePrimaryCtxRetain", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_int_equal(tf_gpu_available(), 0);
    assert_true(known_error_is_kept());
    set_known_error();
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_int_equal(tf_gpu_available(), 0);
    assert_true(known_error_is_kept());
}

/* A driver without devices refuses cuInit; the count is 0 and TF_OK, and
 * the refusal is nobody's error.  cuInit runs until it succeeds once in a
 * process, hence a child whose first call this is. */
static int child_zero_devices_keep_last_error(void) {
    int32_t n = 5;
    tfd()->tfd_set_initialized(0);
    tfd()->tfd_set_devices(0);
    set_known_error();
    SCENARIO_CHECK(tf_device_count(&n) == TF_OK);
    SCENARIO_CHECK(n == 0);
    SCENARIO_CHECK(tfd()->tfd_calls("cuInit") == 1);
    SCENARIO_CHECK(known_error_is_kept());
    return 0;
}

static void zero_devices_keep_last_error(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(run_child("zero_devices_keep_last_error", NULL), 0);
}

static const struct child_scenario scenarios[] = {
    {"zero_devices_keep_last_error", child_zero_devices_keep_last_error},
    {NULL, NULL},
};

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(count_and_describe),
        TF_TEST(double_devices_are_described_exactly),
        TF_TEST(discovery_creates_no_context),
        TF_TEST(query_failures_leave_output_untouched),
        TF_TEST(bad_arguments),
        TF_TEST(smaller_struct_gets_only_what_fits),
        TF_TEST(gpu_available_keeps_last_error),
        TF_TEST(gpu_available_is_zero_without_devices),
        TF_TEST(gpu_available_is_zero_when_runtime_fails),
        TF_TEST(gpu_available_is_zero_when_sync_fails),
        TF_TEST(gpu_available_logs_what_its_teardown_leaks),
        TF_TEST(gpu_available_failed_probe_keeps_last_error),
        TF_TEST(zero_devices_keep_last_error),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
