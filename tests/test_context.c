/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tf_with_context and every call that runs caller code: the caller's exact
 * context comes back on every path, whatever that code did to it. */
#include <cudaTypedefs.h>
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

/* Already current: one cuCtxGetCurrent before the callback, one after it
 * (the callback left the context alone), nothing else. */
static void fast_path_when_primary_is_current(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    struct seen s = {0};
    char log[256];
    tf_runtime *rt = new_runtime();
    raw_set_current_context(primary_of(rt));
    tfd()->tfd_log_clear();
    assert_ok(tf_with_context(rt, record_context, &s));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log, "cuCtxGetCurrent,cuCtxGetCurrent");
    assert_ptr_equal(raw_current_context(), primary_of(rt));
    raw_set_current_context(NULL);
    assert_ok(tf_runtime_release(rt));
}

/* From elsewhere: exactly get, set, set (no runtime-API device calls). */
static void slow_path_costs_three_driver_calls(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    struct seen s = {0};
    char log[256];
    tf_runtime *rt = new_runtime();
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
    (void)state;
    REQUIRE_DOUBLE();
    struct seen s = {0};
    tf_runtime *rt = new_runtime();
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

/* ---- caller code that moves the thread ------------------------------------
 * Every call that runs caller code under the primary context (callbacks,
 * workspace releases) puts the caller's context back even when that code
 * changed the thread's context: to another context, or to none (a pop).
 * Checked from the fast path (the primary context already current) and
 * from no context. */

static struct {
    void *to; /* the context the caller's code makes current */
    int moves;
} g_move;

static void move_thread(void) {
    raw_set_current_context(g_move.to);
    g_move.moves++;
}

static int32_t moving_fn(void *user_data) {
    (void)user_data;
    move_thread();
    return 0;
}

static int32_t moving_stream_fn(void *stream, void *user_data) {
    (void)stream;
    (void)user_data;
    move_thread();
    return 0;
}

static int32_t moving_cublas_fn(void *handle, void *stream, void *user_data) {
    (void)handle;
    (void)stream;
    (void)user_data;
    move_thread();
    return 0;
}

static void moving_release(void *resource, void *user_data) {
    (void)resource;
    (void)user_data;
    move_thread();
}

static void no_release(void *resource, void *user_data) {
    (void)resource;
    (void)user_data;
}

/* Each runs the moving code once inside the call under test; `rt` is
 * released by the caller unless the entry released it. */
enum entry { WITH_CONTEXT, STREAM_ENQUEUE, CUBLAS_ENQUEUE, RETIRE, POLL, SYNC, RELEASE, ENTRIES };
static const char *const entry_names[ENTRIES] = {
    "tf_with_context",   "tf_stream_enqueue", "tf_cublas_enqueue", "tf_workspace_retire",
    "tf_workspace_poll", "tf_runtime_sync",   "tf_runtime_release"};

/* Waits for the slot's stream with the driver's own call: the retirement
 * queued before is then passed, but its release has not run. */
static int32_t wait_for_stream(void *stream, void *user_data) {
    PFN_cuStreamSynchronize_v2000 sync;
    (void)user_data;
    *(void **)&sync = raw_driver_entry("cuStreamSynchronize", 2000);
    return sync && sync((CUstream)stream) == CUDA_SUCCESS ? 0 : 1;
}

/* Queues a retirement whose release moves the thread, and waits until the
 * device passed it, so the next call that polls runs it. */
static void retire_moving(tf_runtime *rt) {
    void *before = raw_current_context();
    assert_ok(tf_workspace_retire(rt, NULL, moving_release, NULL));
    assert_ok(tf_stream_enqueue(rt, wait_for_stream, NULL));
    assert_int_equal(g_move.moves, 0);
    raw_set_current_context(before);
}

static tf_status call_entry(enum entry e, tf_runtime *rt) {
    switch (e) {
        case WITH_CONTEXT: return tf_with_context(rt, moving_fn, NULL);
        case STREAM_ENQUEUE: return tf_stream_enqueue(rt, moving_stream_fn, NULL);
        case CUBLAS_ENQUEUE:
            return tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, moving_cublas_fn, NULL);
        case RETIRE: return tf_workspace_retire(rt, NULL, no_release, NULL);
        case POLL: return tf_workspace_poll(rt);
        case SYNC: return tf_runtime_sync(rt);
        case RELEASE: return tf_runtime_release(rt);
        default: return TF_ERROR_INTERNAL;
    }
}

/* Returns 1 (after printing why) if the caller's context did not come back. */
static int caller_code_moved_the_caller(enum entry e, void *start, void *to) {
    tf_runtime *rt = new_runtime();
    tf_status st;
    const char *logged;
    if (start == (void *)1) start = primary_of(rt);
    log_capture_start();
    g_move.to = to;
    g_move.moves = 0;
    raw_set_current_context(start);
    if (e >= RETIRE) retire_moving(rt);
    st = call_entry(e, rt);
    int wrong = st != TF_OK || g_move.moves != 1 || raw_current_context() != start;
    if (wrong)
        print_error(
            "%s from %s, caller code moving to %s: status %d, %d moves, context %p "
            "afterwards, %p before\n",
            entry_names[e], start ? "the primary context" : "no context",
            to ? "another context" : "no context", (int)st, g_move.moves, raw_current_context(),
            start);
    raw_set_current_context(NULL);
    if (e != RELEASE) assert_ok(tf_runtime_release(rt));
    /* The library's own work after the caller's code (more releases, the
     * teardown's destroys) ran in the primary context again. */
    logged = log_capture_stop();
    if (logged[0] != '\0') {
        print_error("%s: the library logged: %s\n", entry_names[e], logged);
        wrong = 1;
    }
    return wrong;
}

static void caller_code_cannot_move_the_caller(void **state) {
    void *other = raw_create_context();
    int e, s, t, wrong = 0;
    (void)state;
    for (e = 0; e < ENTRIES; ++e)
        for (s = 0; s < 2; ++s)     /* from the primary (fast path), from none */
            for (t = 0; t < 2; ++t) /* to another context, to none (a pop) */
                wrong += caller_code_moved_the_caller((enum entry)e, s == 0 ? (void *)1 : NULL,
                                                      t == 0 ? other : NULL);
    raw_destroy_context(other);
    assert_int_equal(wrong, 0);
}

/* The fast path's price for that: one more cuCtxGetCurrent at the end. */
static void fast_path_checks_again_after_caller_code(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    char log[256];
    tf_runtime *rt = new_runtime();
    raw_set_current_context(primary_of(rt));
    g_move.to = NULL;
    g_move.moves = 0;
    tfd()->tfd_log_clear();
    assert_ok(tf_with_context(rt, moving_fn, NULL));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log, "cuCtxGetCurrent,cuCtxGetCurrent,cuCtxSetCurrent");
    assert_ptr_equal(raw_current_context(), primary_of(rt));
    raw_set_current_context(NULL);
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
        TF_TEST(caller_code_cannot_move_the_caller),
        TF_TEST(fast_path_checks_again_after_caller_code),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
