/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Stream slots: created once, non-blocking, in the primary context, chosen
 * by the calling thread; tf_runtime_sync waits for the caller's slot only;
 * a sticky device fault makes every later call refuse. */
#include <pthread.h>
#include <string.h>

#include "support/test_support.h"

static void stream_is_created_once_and_kept(void **state) {
    tf_runtime *rt = new_runtime();
    void *a = NULL, *b = NULL;
    int32_t slot = -1;
    (void)state;
    assert_ok(tf_runtime_stream(rt, &a));
    assert_ok(tf_runtime_stream(rt, &b));
    assert_non_null(a);
    assert_ptr_equal(a, b);
    assert_ok(tf_runtime_current_slot(rt, &slot));
    assert_ok(tf_runtime_slot_stream(rt, slot, &b));
    assert_ptr_equal(a, b);
    assert_null(raw_current_context());
    if (tfd()) {
        void *primary = NULL;
        assert_int_equal(tfd()->tfd_calls("cuStreamCreate"), 1);
        assert_int_equal(tfd()->tfd_stream_flags(a), CU_STREAM_NON_BLOCKING);
        assert_ok(tf_runtime_primary_context(rt, &primary));
        assert_ptr_equal(tfd()->tfd_stream_context(a), primary);
    }
    assert_ok(tf_runtime_release(rt));
}

static void each_slot_has_its_own_stream(void **state) {
    tf_runtime *rt = new_runtime_with_slots(4);
    void *s[4];
    int i, j;
    (void)state;
    for (i = 0; i < 4; ++i) assert_ok(tf_runtime_slot_stream(rt, i, &s[i]));
    for (i = 0; i < 4; ++i)
        for (j = 0; j < i; ++j) assert_ptr_not_equal(s[i], s[j]);
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_STREAMS), 4);
    assert_failure(tf_runtime_slot_stream(rt, 4, &s[0]), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_slot_stream", "slot 4 is outside 0..3");
    assert_failure(tf_runtime_slot_stream(rt, 0, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_slot_stream", "NULL");
    assert_ok(tf_runtime_release(rt));
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_STREAMS), 0);
}

/* A failed creation is retried by the next call; a created stream is never
 * replaced. */
static void failed_creation_is_retried(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *s = NULL, *again = NULL;
    INJECT("cuStreamCreate", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_runtime_stream(rt, &s), TF_ERROR_OUT_OF_MEMORY, "tf_runtime_stream",
                   "cuStreamCreate failed", "CUDA_ERROR_OUT_OF_MEMORY (2)");
    assert_null(s);
    assert_null(raw_current_context());
    assert_ok(tf_runtime_stream(rt, &s));
    assert_ok(tf_runtime_stream(rt, &again));
    assert_ptr_equal(s, again);
    assert_int_equal(tfd()->tfd_calls("cuStreamCreate"), 2);
    assert_ok(tf_runtime_release(rt));
}

struct thread_slot {
    tf_runtime *rt;
    int32_t slot;
    void *stream;
};

static void *ask_slot(void *arg) {
    struct thread_slot *t = arg;
    /* a failure shows as a slot out of range or a NULL stream */
    if (tf_runtime_current_slot(t->rt, &t->slot) != TF_OK) t->slot = -1;
    if (tf_runtime_stream(t->rt, &t->stream) != TF_OK) t->stream = NULL;
    return NULL;
}

/* Threads are numbered as they first call; slot = number mod slot count, so
 * consecutive new threads land on consecutive slots. */
static void threads_spread_over_slots(void **state) {
    enum { N = 8 };
    tf_runtime *rt = new_runtime_with_slots(N);
    struct thread_slot t[N];
    int i, seen[N] = {0};
    (void)state;
    for (i = 0; i < N; ++i) {
        pthread_t th;
        t[i].rt = rt;
        pthread_create(&th, NULL, ask_slot, &t[i]);
        pthread_join(th, NULL); /* one at a time: numbering is then sequential */
    }
    for (i = 0; i < N; ++i) {
        assert_true(t[i].slot >= 0 && t[i].slot < N);
        seen[t[i].slot]++;
        if (i) assert_int_equal(t[i].slot, (t[i - 1].slot + 1) % N);
    }
    for (i = 0; i < N; ++i) assert_int_equal(seen[i], 1);
    for (i = 0; i < N; ++i) {
        void *expected = NULL;
        assert_ok(tf_runtime_slot_stream(rt, t[i].slot, &expected));
        assert_ptr_equal(t[i].stream, expected);
    }
    assert_ok(tf_runtime_release(rt));
}

/* Sync with no stream on the slot: nothing to wait for, no driver call. */
static void sync_without_stream_is_free(void **state) {
    tf_runtime *rt = new_runtime();
    (void)state;
    if (tfd()) tfd()->tfd_log_clear();
    assert_ok(tf_runtime_sync(rt));
    if (tfd()) assert_int_equal(tfd()->tfd_log_count(), 0);
    assert_ok(tf_runtime_release(rt));
}

static void sync_waits_for_the_callers_slot_only(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime_with_slots(4), *bound = NULL;
    void *mine = NULL, *other = NULL;
    char log[512];
    assert_ok(tf_runtime_bind_slot(rt, 1, &bound));
    assert_ok(tf_runtime_stream(bound, &mine));
    assert_ok(tf_runtime_slot_stream(rt, 2, &other));
    tfd()->tfd_log_clear();
    assert_ok(tf_runtime_sync(bound));
    tfd()->tfd_log_format(log, sizeof log, 0);
    /* cuStreamIsCapturing: a capture begun outside the library is refused */
    assert_string_equal(log,
                        "cuCtxGetCurrent,cuCtxSetCurrent,cuStreamIsCapturing,cuStreamSynchronize,"
                        "cuCtxSetCurrent");
    assert_int_equal(tfd()->tfd_calls("cuStreamSynchronize"), 1);
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(bound));
    assert_ok(tf_runtime_release(rt));
}

static void sync_failure_is_reported(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *s = NULL;
    assert_ok(tf_runtime_stream(rt, &s));
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_runtime_sync(rt), TF_ERROR_CUDA, "tf_runtime_sync",
                   "cuStreamSynchronize failed", "(999)");
    assert_null(raw_current_context());
    assert_ok(tf_runtime_sync(rt)); /* not sticky: the runtime still works */
    assert_ok(tf_runtime_release(rt));
}

static int32_t noop(void *user_data) {
    (void)user_data;
    return 0;
}

/* A sticky fault: every later call refuses with the original cause; the
 * last release leaks quietly and still drops the primary context. */
static void sticky_fault_poisons_the_runtime(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *s = NULL, *primary = NULL;
    const char *log;
    assert_ok(tf_runtime_stream(rt, &s));
    assert_ok(tf_runtime_primary_context(rt, &primary));
    tfd()->tfd_poison_context(primary, CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_failure(tf_runtime_sync(rt), TF_ERROR_DEVICE_FAULT, "tf_runtime_sync",
                   "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    assert_failure(tf_with_context(rt, noop, NULL), TF_ERROR_DEVICE_FAULT, "tf_with_context",
                   "unusable", "cuStreamSynchronize", "(700)");
    assert_int_equal(tf_last_error_code(), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_failure(tf_runtime_stream(rt, &s), TF_ERROR_DEVICE_FAULT, "tf_runtime_stream",
                   "unusable");
    assert_failure(tf_runtime_sync(rt), TF_ERROR_DEVICE_FAULT, "tf_runtime_sync", "unusable");
    assert_null(raw_current_context());
    tfd()->tfd_log_clear();
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    log = log_capture_stop();
    assert_string_equal(log, ""); /* quiet */
    /* Not synchronized, not destroyed: only the primary context is dropped
     * (the driver then reclaims what was left in it). */
    {
        char calls[256];
        tfd()->tfd_log_format(calls, sizeof calls, 0);
        assert_string_equal(calls, "cuDevicePrimaryCtxRelease");
    }
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(stream_is_created_once_and_kept), TF_TEST(each_slot_has_its_own_stream),
        TF_TEST(failed_creation_is_retried),      TF_TEST(threads_spread_over_slots),
        TF_TEST(sync_without_stream_is_free),     TF_TEST(sync_waits_for_the_callers_slot_only),
        TF_TEST(sync_failure_is_reported),        TF_TEST(sticky_fault_poisons_the_runtime),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
