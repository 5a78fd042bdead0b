/* tf_with_context: the caller's exact context comes back on every path. */
#include <string.h>

#include "support/test_support.h"

struct seen {
    tf_runtime *rt;
    void *context_inside;
    int calls;
    int32_t result;
};

static int32_t record_context(void *user_data) {
    struct seen *s = user_data;
    s->context_inside = raw_current_context();
    s->calls++;
    return s->result;
}

static void *primary_of(tf_runtime *rt) {
    void *p = NULL;
    assert_ok(tf_runtime_primary_context(rt, &p));
    assert_non_null(p);
    return p;
}

static void from_no_context_restores_null(void **state) {
    struct seen s = {0};
    tf_runtime *rt = new_runtime();
    (void)state;
    raw_set_current_context(NULL);
    assert_ok(tf_with_context(rt, record_context, &s));
    assert_int_equal(s.calls, 1);
    assert_ptr_equal(s.context_inside, primary_of(rt));
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

static void from_another_context_restores_it(void **state) {
    struct seen s = {0};
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context();
    (void)state;
    raw_set_current_context(other);
    assert_ok(tf_with_context(rt, record_context, &s));
    assert_ptr_equal(s.context_inside, primary_of(rt));
    assert_ptr_equal(raw_current_context(), other);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
}

/* Already current: one cuCtxGetCurrent and nothing else. */
static void fast_path_when_primary_is_current(void **state) {
    struct seen s = {0};
    char log[256];
    tf_runtime *rt = new_runtime();
    (void)state;
    REQUIRE_DOUBLE();
    raw_set_current_context(primary_of(rt));
    tfd()->tfd_log_clear();
    assert_ok(tf_with_context(rt, record_context, &s));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log, "cuCtxGetCurrent");
    assert_ptr_equal(raw_current_context(), primary_of(rt));
    raw_set_current_context(NULL);
    assert_ok(tf_runtime_release(rt));
}

/* From elsewhere: exactly get, set, set (no runtime-API device calls). */
static void slow_path_costs_three_driver_calls(void **state) {
    struct seen s = {0};
    char log[256];
    tf_runtime *rt = new_runtime();
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_log_clear();
    assert_ok(tf_with_context(rt, record_context, &s));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log, "cuCtxGetCurrent,cuCtxSetCurrent,cuCtxSetCurrent");
    assert_ok(tf_runtime_release(rt));
}

static void callback_error_is_reported_and_context_restored(void **state) {
    struct seen s = {0};
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context();
    (void)state;
    s.result = -42;
    raw_set_current_context(other);
    assert_failure(tf_with_context(rt, record_context, &s), TF_ERROR_CALLBACK, "tf_with_context",
                   "callback returned -42");
    assert_int_equal(tf_last_error_code(), -42);
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_CALLBACK);
    assert_string_equal(tf_last_error_call(), "callback");
    assert_ptr_equal(raw_current_context(), other);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
}

static void get_current_failure_skips_the_callback(void **state) {
    struct seen s = {0};
    tf_runtime *rt = new_runtime();
    (void)state;
    REQUIRE_DOUBLE();
    INJECT("cuCtxGetCurrent", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_with_context(rt, record_context, &s), TF_ERROR_CUDA, "tf_with_context",
                   "cuCtxGetCurrent failed", "CUDA_ERROR_UNKNOWN (999)");
    assert_string_equal(tf_last_error_call(), "cuCtxGetCurrent");
    assert_int_equal(tf_last_error_code(), CUDA_ERROR_UNKNOWN);
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_CUDA);
    assert_int_equal(s.calls, 0);
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

/* A failed activation never runs the callback and leaves the caller in its
 * own context: whether cuCtxSetCurrent changed nothing (`after` 0) or
 * switched and still reported failure (`after` 1, rolled back). */
static void check_failed_activation(int after, int code, const char *fragment) {
    struct seen s = {0};
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context();
    raw_set_current_context(other);
    if (after)
        INJECT_AFTER("cuCtxSetCurrent", 1, code, 1);
    else
        INJECT("cuCtxSetCurrent", 1, code, 1);
    assert_failure(tf_with_context(rt, record_context, &s), TF_ERROR_CUDA, "tf_with_context",
                   "cuCtxSetCurrent failed", fragment);
    assert_int_equal(s.calls, 0);
    assert_ptr_equal(raw_current_context(), other);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
}

static void activation_failure_leaves_caller_context(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_failed_activation(0, CUDA_ERROR_INVALID_CONTEXT, "(201)");
}

static void partial_activation_is_rolled_back(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_failed_activation(1, CUDA_ERROR_UNKNOWN, "(999)");
}

/* Restore failures are logged, never returned; outside teardown even a
 * deinitialized driver's refusal is told, since the caller's thread really
 * is left elsewhere. */
static void check_restore_failure_is_logged(int code, const char *fragment) {
    struct seen s = {0};
    const char *log;
    tf_runtime *rt = new_runtime();
    INJECT("cuCtxSetCurrent", 2, code, 1);
    log_capture_start();
    assert_ok(tf_with_context(rt, record_context, &s));
    log = log_capture_stop();
    assert_int_equal(s.calls, 1);
    assert_non_null(strstr(log, "tf_with_context: failed to restore the caller's CUDA context"));
    assert_non_null(strstr(log, fragment));
    raw_set_current_context(NULL);
    assert_ok(tf_runtime_release(rt));
}

static void restore_failure_goes_to_the_log(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_restore_failure_is_logged(CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN (999)");
}

static void restore_failure_on_deinit_is_still_logged(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_restore_failure_is_logged(CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED (4)");
}

struct nest {
    tf_runtime *outer, *inner;
    void *inner_context, *after_inner;
};

static int32_t innermost(void *user_data) {
    struct nest *n = user_data;
    n->inner_context = raw_current_context();
    return 0;
}

static int32_t nested(void *user_data) {
    struct nest *n = user_data;
    tf_status st = tf_with_context(n->inner, innermost, n);
    n->after_inner = raw_current_context();
    return st;
}

static void nested_calls_restore_each_level(void **state) {
    struct nest n = {0};
    (void)state;
    n.outer = new_runtime();
    n.inner = new_runtime();
    assert_ok(tf_with_context(n.outer, nested, &n));
    /* Both runtimes share device 0's primary context. */
    assert_ptr_equal(n.inner_context, primary_of(n.outer));
    assert_ptr_equal(n.after_inner, primary_of(n.outer));
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(n.inner));
    assert_ok(tf_runtime_release(n.outer));
}

static void null_callback_is_refused(void **state) {
    tf_runtime *rt = new_runtime();
    (void)state;
    assert_failure(tf_with_context(rt, NULL, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_with_context",
                   "fn is NULL");
    assert_failure(tf_with_context(NULL, record_context, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_with_context", "NULL");
    assert_ok(tf_runtime_release(rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(from_no_context_restores_null),
        TF_TEST(from_another_context_restores_it),
        TF_TEST(fast_path_when_primary_is_current),
        TF_TEST(slow_path_costs_three_driver_calls),
        TF_TEST(callback_error_is_reported_and_context_restored),
        TF_TEST(get_current_failure_skips_the_callback),
        TF_TEST(activation_failure_leaves_caller_context),
        TF_TEST(partial_activation_is_rolled_back),
        TF_TEST(restore_failure_goes_to_the_log),
        TF_TEST(restore_failure_on_deinit_is_still_logged),
        TF_TEST(nested_calls_restore_each_level),
        TF_TEST(null_callback_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
