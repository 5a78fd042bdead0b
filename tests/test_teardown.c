/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The last release: synchronize every created stream; free only if all of
 * them retired, else leak on purpose; release the primary context; leave the
 * caller's context as it was.  Failures go to the log, never to the status. */
#include <string.h>

#include "support/test_support.h"

static tf_runtime *runtime_with_streams(int n) {
    tf_runtime *rt = new_runtime_with_slots(4);
    int i;
    for (i = 0; i < n; ++i) {
        void *s;
        assert_ok(tf_runtime_slot_stream(rt, i, &s));
    }
    return rt;
}

static void release_syncs_destroys_and_restores(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = runtime_with_streams(3);
    void *other = raw_create_context();
    char log[1024];
    const char *warnings;
    raw_set_current_context(other);
    tfd()->tfd_log_clear();
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_string_equal(warnings, "");
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log,
                        "cuCtxGetCurrent,cuCtxSetCurrent,"
                        "cuStreamSynchronize,cuStreamSynchronize,cuStreamSynchronize,"
                        "cuStreamDestroy,cuStreamDestroy,cuStreamDestroy,"
                        "cuDevicePrimaryCtxRelease,cuCtxSetCurrent");
    assert_int_equal(tfd()->tfd_live(TFD_STREAMS), 0);
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    assert_ptr_equal(raw_current_context(), other);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
}

/* A runtime that never made a stream touches no context at release. */
static void release_without_streams_only_drops_the_retain(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    char log[256];
    tfd()->tfd_log_clear();
    assert_ok(tf_runtime_release(rt));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log, "cuDevicePrimaryCtxRelease");
}

/* The caller holding our primary context current keeps it. */
static void release_keeps_primary_current_for_caller(void **state) {
    tf_runtime *keep = new_runtime(), *rt = runtime_with_streams(1);
    void *primary = NULL;
    (void)state;
    assert_ok(tf_runtime_primary_context(rt, &primary));
    raw_set_current_context(primary);
    assert_ok(tf_runtime_release(rt));
    assert_ptr_equal(raw_current_context(), primary);
    raw_set_current_context(NULL);
    assert_ok(tf_runtime_release(keep));
}

static void sync_failure_leaks_everything_but_the_retain(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = runtime_with_streams(2);
    const char *warnings;
    INJECT("cuStreamSynchronize", 2, CUDA_ERROR_LAUNCH_TIMEOUT, 1);
    /* a last error the teardown must not change */
    assert_int_equal(tf_runtime_retain(NULL), TF_ERROR_INVALID_ARGUMENT);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "cuStreamSynchronize of slot 1 failed"));
    assert_non_null(strstr(warnings, "CUDA_ERROR_LAUNCH_TIMEOUT (702)"));
    assert_non_null(strstr(warnings, "leaking"));
    assert_int_equal(tfd()->tfd_calls("cuStreamDestroy"), 0);
    assert_int_equal(tfd()->tfd_calls("cuDevicePrimaryCtxRelease"), 1);
    assert_int_equal(tf_last_error_status(), TF_ERROR_INVALID_ARGUMENT);
    assert_string_equal(tf_last_error_operation(), "tf_runtime_retain");
    assert_null(raw_current_context());
}

static void activation_failure_leaks_and_logs(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = runtime_with_streams(1);
    const char *warnings;
    INJECT("cuCtxSetCurrent", 1, CUDA_ERROR_INVALID_CONTEXT, 1);
    /* a last error the teardown must not change: its own failure is logged */
    assert_int_equal(tf_runtime_retain(NULL), TF_ERROR_INVALID_ARGUMENT);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "cuCtxSetCurrent failed"));
    assert_non_null(strstr(warnings, "leaking the runtime's streams"));
    assert_int_equal(tf_last_error_status(), TF_ERROR_INVALID_ARGUMENT);
    assert_string_equal(tf_last_error_operation(), "tf_runtime_retain");
    assert_string_equal(tf_last_error_call(), "");
    assert_int_equal(tfd()->tfd_calls("cuStreamSynchronize"), 0);
    assert_int_equal(tfd()->tfd_calls("cuStreamDestroy"), 0);
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    assert_null(raw_current_context());
}

/* At process exit the driver may report deinitialization: leak quietly. */
static void deinitialized_driver_leaks_quietly(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = runtime_with_streams(2);
    const char *warnings;
    INJECT("*", 1, CUDA_ERROR_DEINITIALIZED, 0);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    tfd()->tfd_clear_faults();
    assert_string_equal(warnings, "");
    assert_int_equal(tfd()->tfd_calls("cuStreamDestroy"), 0);
    test_leaves_retained(0, 1); /* every driver call refused: the retain stays */
}

static void deinitialized_during_sync_leaks_quietly(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = runtime_with_streams(2);
    const char *warnings;
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_DEINITIALIZED, 0);
    INJECT("cuDevicePrimaryCtxRelease", 1, CUDA_ERROR_DEINITIALIZED, 0);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_string_equal(warnings, "");
    assert_int_equal(tfd()->tfd_calls("cuStreamDestroy"), 0);
    tfd()->tfd_clear_faults();
    /* The release was attempted once; the driver refused it quietly. */
    assert_int_equal(tfd()->tfd_calls("cuDevicePrimaryCtxRelease"), 1);
    test_leaves_retained(0, 1);
}

static void destroy_and_release_failures_are_logged(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = runtime_with_streams(2);
    const char *warnings;
    INJECT("cuStreamDestroy", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    INJECT("cuDevicePrimaryCtxRelease", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "cuStreamDestroy of slot 0 failed"));
    assert_non_null(strstr(warnings, "failed to release the primary context of device 0"));
    assert_non_null(strstr(warnings, "CUDA_ERROR_UNKNOWN (999)"));
    assert_int_equal(tfd()->tfd_calls("cuStreamDestroy"), 2); /* went on after the failure */
    assert_null(raw_current_context());
    test_leaves_retained(0, 1); /* the refused release */
}

static void restore_failure_after_release_is_logged(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = runtime_with_streams(1);
    void *other = raw_create_context();
    const char *warnings;
    raw_set_current_context(other);
    INJECT("cuCtxSetCurrent", 2, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_non_null(
        strstr(warnings, "tf_runtime_release: failed to restore the caller's CUDA context"));
    raw_set_current_context(NULL);
    raw_destroy_context(other);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(release_syncs_destroys_and_restores),
        TF_TEST(release_without_streams_only_drops_the_retain),
        TF_TEST(release_keeps_primary_current_for_caller),
        TF_TEST(sync_failure_leaks_everything_but_the_retain),
        TF_TEST(activation_failure_leaks_and_logs),
        TF_TEST(deinitialized_driver_leaks_quietly),
        TF_TEST(destroy_and_release_failures_are_logged),
        TF_TEST(restore_failure_after_release_is_logged),
        TF_TEST(deinitialized_during_sync_leaks_quietly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
