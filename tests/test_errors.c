/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Statuses, the thread-local last error, and the log callback. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "support/test_support.h"

static const tf_status all_statuses[] = {TF_OK,
                                         TF_ERROR_INVALID_ARGUMENT,
                                         TF_ERROR_INVALID_HANDLE,
                                         TF_ERROR_DRIVER_NOT_FOUND,
                                         TF_ERROR_DRIVER_STUB,
                                         TF_ERROR_NO_DEVICE,
                                         TF_ERROR_DEVICE_UNAVAILABLE,
                                         TF_ERROR_DRIVER_TOO_OLD,
                                         TF_ERROR_CUDA,
                                         TF_ERROR_NOT_SUPPORTED,
                                         TF_ERROR_LIBRARY_NOT_FOUND,
                                         TF_ERROR_PROVIDER,
                                         TF_ERROR_CALLBACK,
                                         TF_ERROR_OUT_OF_MEMORY,
                                         TF_ERROR_RUNTIME_STATE,
                                         TF_ERROR_DEVICE_FAULT,
                                         TF_ERROR_COMPILE,
                                         TF_ERROR_INTERNAL};

/* Codes are part of the ABI: never renumbered. */
static void status_values_are_frozen(void **state) {
    size_t i;
    (void)state;
    for (i = 0; i < sizeof all_statuses / sizeof all_statuses[0]; ++i)
        assert_int_equal(all_statuses[i], (tf_status)i);
    assert_int_equal(TF_CODE_NONE, 0);
    assert_int_equal(TF_CODE_CUDA, 1);
    assert_int_equal(TF_CODE_CUBLAS, 2);
    assert_int_equal(TF_CODE_NVRTC, 3);
    assert_int_equal(TF_CODE_CALLBACK, 4);
    assert_int_equal(TF_CODE_SYSTEM, 5);
}

static void every_status_has_a_distinct_string(void **state) {
    size_t i, j;
    (void)state;
    for (i = 0; i < sizeof all_statuses / sizeof all_statuses[0]; ++i) {
        const char *s = tf_status_string(all_statuses[i]);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_string_not_equal(s, "unknown status");
        for (j = 0; j < i; ++j) assert_string_not_equal(s, tf_status_string(all_statuses[j]));
    }
    assert_string_equal(tf_status_string(-1), "unknown status");
    assert_string_equal(tf_status_string(1000), "unknown status");
}

static void last_error_names_operation_and_keeps_until_next_failure(void **state) {
    int32_t slots = 0;
    (void)state;
    tf_clear_last_error();
    assert_string_equal(tf_last_error_message(), "");
    assert_int_equal(tf_last_error_status(), TF_OK);
    assert_failure(tf_runtime_slot_count(NULL, &slots), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_slot_count", "NULL");
    assert_string_equal(tf_last_error_call(), "");
    assert_int_equal(tf_last_error_code(), 0);
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_NONE);
    /* A successful call leaves the record alone. */
    assert_int_equal(tf_version(), TF_VERSION_NUMBER);
    assert_int_equal(tf_last_error_status(), TF_ERROR_INVALID_ARGUMENT);
    tf_clear_last_error();
    assert_int_equal(tf_last_error_status(), TF_OK);
    assert_string_equal(tf_last_error_operation(), "");
}

static void last_error_copies_into_caller_struct(void **state) {
    tf_error_info info;
    (void)state;
    assert_int_equal(tf_runtime_identity(NULL, NULL), TF_ERROR_INVALID_ARGUMENT);
    tf_error_info_init(&info, sizeof info);
    assert_int_equal(info.struct_size, sizeof info);
    assert_ok(tf_last_error(&info));
    assert_int_equal(info.struct_size, sizeof info);
    assert_int_equal(info.status, TF_ERROR_INVALID_ARGUMENT);
    assert_string_equal(info.operation, "tf_runtime_identity");
    assert_non_null(strstr(info.message, "tf_runtime_identity: "));
}

/* An older caller's smaller struct gets only what fits. */
static void last_error_respects_a_smaller_struct(void **state) {
    unsigned char buf[sizeof(tf_error_info) + 16];
    tf_error_info *info = (tf_error_info *)buf;
    const size_t small = offsetof(tf_error_info, code_domain);
    (void)state;
    assert_int_equal(tf_runtime_identity(NULL, NULL), TF_ERROR_INVALID_ARGUMENT);
    memset(buf, 0xAB, sizeof buf);
    info->struct_size = (uint32_t)small;
    assert_ok(tf_last_error(info));
    assert_int_equal(info->struct_size, small);
    assert_int_equal(info->status, TF_ERROR_INVALID_ARGUMENT);
    assert_int_equal(buf[small], 0xAB); /* nothing past struct_size written */
}

static void last_error_refuses_bad_struct(void **state) {
    tf_error_info info;
    (void)state;
    assert_failure(tf_last_error(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_last_error", "NULL");
    memset(&info, 0, sizeof info);
    info.struct_size = 2;
    assert_failure(tf_last_error(&info), TF_ERROR_INVALID_ARGUMENT, "tf_last_error", "too small");
    tf_error_info_init(NULL, 0); /* ignored, no crash */
}

/* The smallest struct tf_last_error fills reaches past status: one that
 * ends at status or inside it is refused, and nothing is written. */
static void last_error_needs_the_whole_status(void **state) {
    const size_t status_end = offsetof(tf_error_info, status) + sizeof(tf_status);
    size_t size;
    (void)state;
    for (size = offsetof(tf_error_info, status); size < status_end; ++size) {
        unsigned char buf[sizeof(tf_error_info)];
        tf_error_info *info = (tf_error_info *)buf;
        size_t i;
        memset(buf, 0xAB, sizeof buf);
        info->struct_size = (uint32_t)size;
        assert_failure(tf_last_error(info), TF_ERROR_INVALID_ARGUMENT, "tf_last_error",
                       "too small");
        assert_int_equal(info->struct_size, size);
        for (i = sizeof info->struct_size; i < sizeof buf; ++i) assert_int_equal(buf[i], 0xAB);
    }
    {
        unsigned char buf[sizeof(tf_error_info)];
        tf_error_info *info = (tf_error_info *)buf;
        assert_int_equal(tf_runtime_identity(NULL, NULL), TF_ERROR_INVALID_ARGUMENT);
        memset(buf, 0xAB, sizeof buf);
        info->struct_size = (uint32_t)status_end;
        assert_ok(tf_last_error(info));
        assert_int_equal(info->status, TF_ERROR_INVALID_ARGUMENT);
        assert_int_equal(buf[status_end], 0xAB);
    }
}

static void *fail_on_other_thread(void *arg) {
    (void)arg;
    if (tf_runtime_retain(NULL) != TF_ERROR_INVALID_ARGUMENT) return NULL;
    return strstr(tf_last_error_message(), "tf_runtime_retain") ? (void *)1 : NULL;
}

static void last_error_is_per_thread(void **state) {
    pthread_t t;
    void *seen = NULL;
    (void)state;
    tf_clear_last_error();
    assert_int_equal(pthread_create(&t, NULL, fail_on_other_thread, NULL), 0);
    pthread_join(t, &seen);
    assert_non_null(seen);
    assert_int_equal(tf_last_error_status(), TF_OK); /* this thread saw nothing */
}

/* A caller's string that ends up in the message makes it longer than
 * TF_ERROR_MESSAGE_CAPACITY: the message is cut to capacity - 1 bytes and
 * terminated, the rest of the record is intact, and tf_last_error copies
 * no byte past the caller's struct. */
static void long_messages_are_truncated_not_overrun(void **state) {
    enum { NAME = 3 * TF_ERROR_MESSAGE_CAPACITY };
    static const char kPrefix[] = "tf_cublas_symbol: 'notcublas_";
    char name[NAME + 1];
    struct {
        tf_error_info info;
        unsigned char canary[64];
    } out;
    const char *msg;
    unsigned char canary[64];
    (void)state;
    memset(name, 'x', NAME);
    memcpy(name, "notcublas_", 10);
    name[NAME] = '\0';
    assert_int_equal(tf_cublas_symbol(name, (void **)&msg), TF_ERROR_INVALID_ARGUMENT);
    msg = tf_last_error_message();
    /* the full message would be far longer: it was cut, not overrun */
    assert_int_equal(strlen(msg), TF_ERROR_MESSAGE_CAPACITY - 1);
    assert_memory_equal(msg, kPrefix, sizeof kPrefix - 1);
    assert_int_equal(msg[TF_ERROR_MESSAGE_CAPACITY - 2], 'x');
    assert_string_equal(tf_last_error_operation(), "tf_cublas_symbol");
    assert_int_equal(tf_last_error_status(), TF_ERROR_INVALID_ARGUMENT);
    memset(canary, 0xA5, sizeof canary);
    memset(&out, 0xA5, sizeof out);
    tf_error_info_init(&out.info, sizeof out.info);
    assert_ok(tf_last_error(&out.info));
    assert_int_equal(out.info.message[TF_ERROR_MESSAGE_CAPACITY - 1], '\0');
    assert_string_equal(out.info.message, msg);
    assert_memory_equal(out.canary, canary, sizeof canary);
}

/* When the driver cannot name or describe a code, the message still carries
 * the number. */
static void error_names_fall_back_to_the_number(void **state) {
    tf_runtime *rt;
    void *stream = NULL;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    INJECT("cuStreamCreate", 1, CUDA_ERROR_UNKNOWN, 1);
    INJECT("cuGetErrorName", 1, CUDA_ERROR_INVALID_VALUE, 1);
    INJECT("cuGetErrorString", 1, CUDA_ERROR_INVALID_VALUE, 1);
    assert_failure(tf_runtime_stream(rt, &stream), TF_ERROR_CUDA, "tf_runtime_stream",
                   "cuStreamCreate failed: CUDA error (999): no description");
    assert_int_equal(tf_last_error_code(), CUDA_ERROR_UNKNOWN);
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

static int calls;
static void counting_logger(int32_t level, const char *message, void *user_data) {
    (void)level;
    (void)message;
    (void)user_data;
    ++calls;
}

static tf_status nested_status;
static char nested_message[TF_ERROR_MESSAGE_CAPACITY];
static void reentrant_logger(int32_t level, const char *message, void *user_data) {
    (void)level;
    (void)message;
    (void)user_data;
    nested_status = tf_set_log_callback(NULL, NULL);
    snprintf(nested_message, sizeof nested_message, "%s", tf_last_error_message());
}

static void log_callback_can_be_set_and_reset(void **state) {
    (void)state;
    assert_ok(tf_set_log_callback(counting_logger, NULL));
    assert_ok(tf_set_log_callback(NULL, NULL));
    assert_int_equal(calls, 0);
}

/* A log callback that calls tf_set_log_callback gets an error, not a deadlock.
 * Needs a warning to be logged: a teardown whose stream sync fails. */
static void log_callback_reentry_is_refused(void **state) {
    tf_runtime *rt;
    void *stream;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    assert_ok(tf_runtime_stream(rt, &stream));
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    nested_status = TF_OK;
    assert_ok(tf_set_log_callback(reentrant_logger, NULL));
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(nested_status, TF_ERROR_RUNTIME_STATE);
    assert_non_null(
        strstr(nested_message, "tf_set_log_callback: called from inside a log callback"));
    assert_ok(tf_set_log_callback(NULL, NULL));
}

/* NOTE [operation name]: a library call made from inside a callback names
 * itself, and the outer call's name is back when it returns, for the outer
 * call's own failures after it. */
static tf_runtime *nested_rt;
static int32_t nested_callback_fails(void *user_data) {
    int32_t *count = (int32_t *)user_data;
    /* A nested failure, then a nested success. */
    assert_failure(tf_runtime_slot_count(nested_rt, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_slot_count", "out_count is NULL");
    assert_ok(tf_runtime_slot_count(nested_rt, count));
    return 5;
}

static void nested_calls_restore_the_outer_operation(void **state) {
    int32_t count = 0;
    (void)state;
    nested_rt = new_runtime();
    assert_failure(tf_with_context(nested_rt, nested_callback_fails, &count), TF_ERROR_CALLBACK,
                   "tf_with_context", "tf_with_context: callback returned 5");
    assert_int_equal(count, TF_DEFAULT_STREAM_SLOTS);
    assert_ok(tf_runtime_release(nested_rt));
}

/* Teardown names tf_runtime_release in what it logs, whichever call drops
 * the runtime's last reference (here tf_event_release). */
/* The header's CUresult to status table, row by row: a failed driver call
 * reports the mapped status, the CUresult as its code in TF_CODE_CUDA and
 * the call's name.  Injected into the primary context's retain, which no
 * runtime exists yet to remember as a fault. */
static const struct {
    CUresult result;
    tf_status status;
} cuda_statuses[] = {
    {CUDA_ERROR_OUT_OF_MEMORY, TF_ERROR_OUT_OF_MEMORY},
    {CUDA_ERROR_STUB_LIBRARY, TF_ERROR_DRIVER_STUB},
    {CUDA_ERROR_NO_DEVICE, TF_ERROR_NO_DEVICE},
    {CUDA_ERROR_INVALID_DEVICE, TF_ERROR_DEVICE_UNAVAILABLE},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, TF_ERROR_DEVICE_UNAVAILABLE},
    {CUDA_ERROR_NOT_SUPPORTED, TF_ERROR_NOT_SUPPORTED},
    {CUDA_ERROR_ILLEGAL_ADDRESS, TF_ERROR_DEVICE_FAULT},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, TF_ERROR_DEVICE_FAULT},
    {CUDA_ERROR_MISALIGNED_ADDRESS, TF_ERROR_DEVICE_FAULT},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, TF_ERROR_DEVICE_FAULT},
    {CUDA_ERROR_INVALID_PC, TF_ERROR_DEVICE_FAULT},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, TF_ERROR_DEVICE_FAULT},
    {CUDA_ERROR_ASSERT, TF_ERROR_DEVICE_FAULT},
    {CUDA_ERROR_LAUNCH_FAILED, TF_ERROR_DEVICE_FAULT},
    {CUDA_ERROR_LAUNCH_TIMEOUT, TF_ERROR_DEVICE_FAULT},
    {CUDA_ERROR_ECC_UNCORRECTABLE, TF_ERROR_DEVICE_FAULT},
    /* every other result */
    {CUDA_ERROR_INVALID_VALUE, TF_ERROR_CUDA},
    {CUDA_ERROR_INVALID_CONTEXT, TF_ERROR_CUDA},
    {CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA},
};

static void driver_results_map_to_their_status(void **state) {
    size_t i;
    (void)state;
    REQUIRE_DOUBLE();
    for (i = 0; i < sizeof cuda_statuses / sizeof cuda_statuses[0]; ++i) {
        tf_runtime *rt = NULL;
        tf_status st;
        INJECT("cuDevicePrimaryCtxRetain", 1, cuda_statuses[i].result, 1);
        st = tf_runtime_new(0, &rt);
        if (st != cuda_statuses[i].status)
            fail_msg("CUresult %d: status %d, expected %d", (int)cuda_statuses[i].result, (int)st,
                     (int)cuda_statuses[i].status);
        assert_failure(st, cuda_statuses[i].status, "tf_runtime_new",
                       "cuDevicePrimaryCtxRetain failed");
        assert_null(rt);
        assert_int_equal(tf_last_error_code(), cuda_statuses[i].result);
        assert_int_equal(tf_last_error_code_domain(), TF_CODE_CUDA);
        assert_string_equal(tf_last_error_call(), "cuDevicePrimaryCtxRetain");
        assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    }
}

static void teardown_logs_under_its_own_name(void **state) {
    tf_runtime *rt;
    tf_event *ev;
    void *stream;
    const char *log;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_ok(tf_event_new(rt, &ev));
    assert_ok(tf_runtime_release(rt)); /* the event keeps the runtime */
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_ok(tf_event_release(ev));
    log = log_capture_stop();
    assert_non_null(strstr(log, "tf_runtime_release: cuStreamSynchronize of slot 0 failed"));
    assert_null(strstr(log, "tf_event_release: cuStreamSynchronize"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(status_values_are_frozen),
        TF_TEST(every_status_has_a_distinct_string),
        TF_TEST(last_error_names_operation_and_keeps_until_next_failure),
        TF_TEST(last_error_copies_into_caller_struct),
        TF_TEST(last_error_respects_a_smaller_struct),
        TF_TEST(last_error_refuses_bad_struct),
        TF_TEST(last_error_needs_the_whole_status),
        TF_TEST(last_error_is_per_thread),
        TF_TEST(long_messages_are_truncated_not_overrun),
        TF_TEST(error_names_fall_back_to_the_number),
        TF_TEST(log_callback_can_be_set_and_reset),
        TF_TEST(log_callback_reentry_is_refused),
        TF_TEST(nested_calls_restore_the_outer_operation),
        TF_TEST(driver_results_map_to_their_status),
        TF_TEST(teardown_logs_under_its_own_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
