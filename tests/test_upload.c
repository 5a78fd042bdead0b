/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Uploads from pageable memory above the staging threshold: host threads
 * copy steps into the slot's staging ring while the device copies earlier
 * steps out.  Round trips, the calls of the pipeline, the source free on
 * return, staging reused only once the device has read it, every failure
 * injected, what a failure abandons, and cancellation. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/test_support.h"
#include "support/transfer_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define THRESHOLD (256 * KiB) /* kStagedUploadAbove */

static long live(int kind) { return tfd() ? tfd()->tfd_live(kind) : 0; }

static int logged(const char *entry) {
    size_t i, n = tfd()->tfd_log_count();
    int count = 0;
    for (i = 0; i < n; ++i) count += strcmp(tfd()->tfd_log_name(i), entry) == 0;
    return count;
}

/* Upload a pattern at an offset, overwrite the source at once, read it
 * back; nothing around the range may change. */
static void round_trip(tf_runtime *rt, size_t n, size_t offset, uint32_t seed) {
    const size_t guard = 64;
    uint64_t d = lib_alloc(rt, n + offset + guard);
    unsigned char *src = malloc(n), *back = malloc(n + offset + guard);
    assert_non_null(src);
    assert_non_null(back);
    memset(back, 0xEE, n + offset + guard);
    assert_ok(tf_upload(rt, back, d, n + offset + guard));
    fill_pattern(src, n, seed);
    assert_ok(tf_upload(rt, src, d + offset, n));
    memset(src, 0, n); /* free again on return */
    assert_ok(tf_download(rt, d, back, n + offset + guard));
    assert_pattern(back + offset, n, seed);
    if (offset) assert_int_equal(back[offset - 1], 0xEE);
    assert_int_equal(back[offset + n], 0xEE);
    assert_int_equal(back[offset + n + guard - 1], 0xEE);
    free(back);
    free(src);
    lib_free(rt, d);
}

static void round_trips(tf_runtime *rt) {
    static const size_t sizes[] = {THRESHOLD, THRESHOLD + 1, MiB + 17, 9 * MiB + 4095, 64 * MiB};
    size_t i;
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        round_trip(rt, sizes[i], 0, (uint32_t)i);
        round_trip(rt, sizes[i], 3, (uint32_t)i + 50);
    }
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

static void round_trips_with_defaults(void **state) {
    (void)state;
    round_trips(new_runtime());
}

static void round_trips_with_small_chunks(void **state) {
    (void)state;
    round_trips(runtime_with(2, 3, 64 << 10));
}

static void round_trips_with_one_thread(void **state) {
    (void)state;
    round_trips(runtime_with(2, 1, 1 << 20));
}

/* ---- the pipeline's calls (double) ----------------------------------------- */

/* Each step: wait until the device has read the buffer, copy in, queue the
 * device copy, record its event.  No stream wait: the call returns once the
 * last step is queued. */
static void large_pageable_upload_is_pipelined(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    const size_t chunk = 64 << 10, n = 10 * chunk + 100;
    tf_runtime *rt;
    uint64_t d;
    unsigned char *src = malloc(n), *back = malloc(n);
    size_t i, count;
    int copies = 0;
    rt = runtime_with(1, 2, (uint32_t)chunk);
    d = lib_alloc(rt, n);
    fill_pattern(src, n, 4);
    assert_ok(tf_upload(rt, src, d, n)); /* makes the ring */
    tfd()->tfd_log_clear();
    assert_ok(tf_upload(rt, src, d, n));
    count = tfd()->tfd_log_count();
    for (i = 0; i < count; ++i) {
        if (strcmp(tfd()->tfd_log_name(i), "cuMemcpyHtoDAsync") != 0) continue;
        ++copies;
        assert_true(i >= 1 && i + 1 < count);
        assert_string_equal(tfd()->tfd_log_name(i - 1), "cuEventSynchronize");
        assert_string_equal(tfd()->tfd_log_name(i + 1), "cuEventRecord");
    }
    assert_int_equal(copies, 11); /* equal steps, none over a chunk */
    assert_int_equal(logged("cuEventSynchronize"), 11);
    assert_int_equal(logged("cuStreamSynchronize") + logged("cuMemHostAlloc"), 0);
    assert_true(tfd()->tfd_pending_total() > 0); /* still queued */
    assert_ok(tf_download(rt, d, back, n));
    assert_pattern(back, n, 4);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(back);
    free(src);
}

/* At or below the threshold, and from page-locked memory: one device copy. */
static void other_uploads_are_one_copy(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt;
    uint64_t d;
    unsigned char *src = malloc(THRESHOLD), *pin;
    rt = new_runtime();
    d = lib_alloc(rt, THRESHOLD);
    pin = pinned_alloc(rt, 2 * THRESHOLD);
    memset(src, 1, THRESHOLD);
    tfd()->tfd_log_clear();
    assert_ok(tf_upload(rt, src, d, THRESHOLD));
    assert_int_equal(logged("cuMemcpyHtoDAsync"), 1);
    assert_int_equal(logged("cuMemHostAlloc") + logged("cuEventRecord"), 0);
    tfd()->tfd_log_clear();
    assert_ok(tf_upload(rt, pin, d, THRESHOLD));
    assert_int_equal(logged("cuMemcpyHtoDAsync"), 1);
    assert_int_equal(logged("cuStreamSynchronize"), 1);
    assert_int_equal(logged("cuMemHostAlloc") + logged("cuEventRecord"), 0);
    pinned_free(rt, pin);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(src);
}

/* Back-to-back uploads while the device runs nothing (deferred): the second
 * one must not overwrite staging the first one's queued copies still read. */
static void staging_is_refilled_only_after_the_device_read_it(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    const size_t n = 5 * MiB + 11;
    tf_runtime *rt;
    uint64_t a, b;
    unsigned char *src = malloc(n), *back = malloc(n);
    tfd()->tfd_set_execution(TFD_EXEC_DEFERRED);
    rt = runtime_with(1, 3, 1 << 20);
    a = lib_alloc(rt, n);
    b = lib_alloc(rt, n);
    fill_pattern(src, n, 21);
    assert_ok(tf_upload(rt, src, a, n));
    fill_pattern(src, n, 22);
    assert_ok(tf_upload(rt, src, b, n));
    memset(src, 0, n);
    assert_ok(tf_download(rt, a, back, n));
    assert_pattern(back, n, 21);
    assert_ok(tf_download(rt, b, back, n));
    assert_pattern(back, n, 22);
    lib_free(rt, b);
    lib_free(rt, a);
    assert_ok(tf_runtime_release(rt));
    free(back);
    free(src);
}

/* ---- failures ---------------------------------------------------------------- */

/* A failure inside the pipeline abandons the ring: the next upload makes a
 * fresh one, teardown frees only that; no thread reads src afterwards. */
static void pipeline_failure(uint32_t threads, const char *entry, unsigned long nth, int code,
                             tf_status expected) {
    const size_t n = MiB + 5;
    const long hosts = live(TFD_HOST_ALLOCS);
    const long reclaimed_hosts = tfd()->tfd_reclaimed(TFD_HOST_ALLOCS);
    tf_runtime *rt = runtime_with(1, threads, 64 << 10);
    uint64_t d = lib_alloc(rt, n);
    unsigned char *src = malloc(n), *back = malloc(n);
    long depth;
    fill_pattern(src, n, 8);
    assert_ok(tf_upload(rt, src, d, 4096)); /* the direct path: no ring yet */
    assert_int_equal(live(TFD_HOST_ALLOCS), hosts);
    INJECT(entry, nth, code, 1);
    assert_failure(tf_upload(rt, src, d, n), expected, "tf_upload", entry, "failed");
    assert_int_equal(tf_last_error_code(), code);
    assert_null(raw_current_context());
    depth = live(TFD_HOST_ALLOCS) - hosts; /* the abandoned ring */
    assert_true(depth >= 2);
    tfd()->tfd_log_clear();
    assert_ok(tf_upload(rt, src, d, n));
    assert_int_equal(logged("cuMemHostAlloc"), depth); /* a fresh ring */
    assert_ok(tf_download(rt, d, back, n));
    assert_pattern(back, n, 8);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    /* The abandoned ring was never freed: it went with the context. */
    assert_int_equal(live(TFD_HOST_ALLOCS), hosts);
    assert_int_equal(tfd()->tfd_reclaimed(TFD_HOST_ALLOCS) - reclaimed_hosts, depth);
    free(back);
    free(src);
}

static void device_copy_failures(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    pipeline_failure(2, "cuMemcpyHtoDAsync", 2, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
    pipeline_failure(4, "cuMemcpyHtoDAsync", 5, CUDA_ERROR_INVALID_VALUE, TF_ERROR_CUDA);
    pipeline_failure(1, "cuMemcpyHtoDAsync", 1, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

static void event_failures(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    pipeline_failure(2, "cuEventRecord", 3, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
    pipeline_failure(2, "cuEventSynchronize", 4, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
    pipeline_failure(1, "cuEventSynchronize", 1, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

/* The ring cannot be made: nothing was queued, all of it is freed. */
static void ring_allocation_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    const size_t n = MiB;
    const long hosts = live(TFD_HOST_ALLOCS), events = live(TFD_EVENTS);
    tf_runtime *rt;
    uint64_t d;
    unsigned char *src = malloc(n);
    rt = runtime_with(1, 2, 64 << 10);
    d = lib_alloc(rt, n);
    memset(src, 3, n);
    tfd()->tfd_log_clear();
    INJECT("cuMemHostAlloc", 2, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_upload(rt, src, d, n), TF_ERROR_OUT_OF_MEMORY, "tf_upload",
                   "cuMemHostAlloc failed");
    assert_int_equal(live(TFD_HOST_ALLOCS), hosts);
    assert_int_equal(live(TFD_EVENTS), events);
    assert_int_equal(logged("cuMemcpyHtoDAsync"), 0);
    assert_ok(tf_upload(rt, src, d, n));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(live(TFD_HOST_ALLOCS), hosts);
    free(src);
}

/* ---- cancellation -------------------------------------------------------------- */

#define CANCEL_BYTES ((size_t)24 << 20)

struct cancelled_upload {
    tf_runtime *rt;
    const unsigned char *src;
    uint64_t dst;
    atomic_int go;
    tf_status status;
    int returned;
};

static void *upload_cancelled(void *arg) {
    struct cancelled_upload *c = arg;
    while (!atomic_load(&c->go)) {
    } /* no cancellation point: the request stays pending */
    c->status = tf_upload(c->rt, c->src, c->dst, CANCEL_BYTES);
    c->returned = 1;
    pthread_testcancel();
    return NULL;
}

/* A pthread_cancel() pending when the upload starts acts after it: the
 * copy threads never read a source whose owner unwound. */
static void cancelled_upload_runs_to_its_end(void **state) {
    tf_runtime *rt = runtime_with(1, 8, 4 << 20); /* one slot: every thread's */
    struct cancelled_upload c;
    unsigned char *src = malloc(CANCEL_BYTES), *back = malloc(CANCEL_BYTES);
    pthread_t th;
    void *ret = NULL;
    (void)state;
    memset(&c, 0, sizeof c);
    c.rt = rt;
    c.src = src;
    c.dst = lib_alloc(rt, CANCEL_BYTES);
    fill_pattern(src, CANCEL_BYTES, 77);
    assert_int_equal(pthread_create(&th, NULL, upload_cancelled, &c), 0);
    assert_int_equal(pthread_cancel(th), 0);
    atomic_store(&c.go, 1);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_ptr_equal(ret, PTHREAD_CANCELED);
    assert_int_equal(c.returned, 1);
    assert_ok(c.status);
    memset(src, 0, CANCEL_BYTES);
    assert_ok(tf_download(rt, c.dst, back, CANCEL_BYTES));
    assert_pattern(back, CANCEL_BYTES, 77);
    lib_free(rt, c.dst);
    assert_ok(tf_runtime_release(rt));
    free(back);
    free(src);
}

/* A cancellation request pending when tf_upload starts acts after it
 * returns, also when the call logs before or after the staged part (a log
 * callback is a cancellation point), as for tf_download (test_download.c):
 * before, a failed activation whose rollback fails; after, a restore that
 * fails, logged from the frame's destructor (a child: a cancellation acted
 * on there ends the process). */

struct upload_args {
    tf_runtime *rt;
    const void *src;
    uint64_t dst;
    size_t len;
};

static tf_status do_upload(void *p) {
    struct upload_args *a = p;
    return tf_upload(a->rt, a->src, a->dst, a->len);
}

static void open_upload(struct upload_args *a) {
    a->rt = runtime_with(1, 4, 1 << 20);
    a->len = 4 * MiB;
    a->dst = lib_alloc(a->rt, a->len);
    a->src = calloc(1, a->len);
}

static void close_upload(struct upload_args *a) {
    tfd()->tfd_clear_faults();
    lib_free(a->rt, a->dst);
    ignore_status(tf_runtime_release(a->rt));
    free((void *)a->src);
}

static void cancelled_upload_logging_before_its_copy_returns(void **state) {
    struct upload_args a;
    tf_status st = TF_OK;
    (void)state;
    REQUIRE_DOUBLE();
    open_upload(&a);
    assert_non_null(a.src);
    INJECT("cuCtxSetCurrent", 1, CUDA_ERROR_UNKNOWN, 2); /* the activation and its rollback */
    assert_int_equal(call_with_cancel_pending(do_upload, &a, &st), 1);
    assert_int_equal(st, TF_ERROR_CUDA);
    close_upload(&a);
}

static int child_cancelled_upload_logging_after_its_copy(void) {
    struct upload_args a;
    tf_status st = TF_ERROR_INTERNAL;
    open_upload(&a);
    SCENARIO_CHECK(a.src != NULL);
    INJECT("cuCtxSetCurrent", 2, CUDA_ERROR_UNKNOWN, 1); /* the restore */
    SCENARIO_CHECK(call_with_cancel_pending(do_upload, &a, &st) == 1);
    SCENARIO_CHECK(st == TF_OK);
    close_upload(&a);
    return 0;
}

static void cancelled_upload_logging_after_its_copy_returns(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(run_child("cancelled_upload_logging_after_its_copy", NULL), 0);
}

static const struct child_scenario scenarios[] = {
    {"cancelled_upload_logging_after_its_copy", child_cancelled_upload_logging_after_its_copy},
    {NULL, NULL},
};

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(round_trips_with_defaults),
        TF_TEST(round_trips_with_small_chunks),
        TF_TEST(round_trips_with_one_thread),
        TF_TEST(large_pageable_upload_is_pipelined),
        TF_TEST(other_uploads_are_one_copy),
        TF_TEST(staging_is_refilled_only_after_the_device_read_it),
        TF_TEST(device_copy_failures),
        TF_TEST(event_failures),
        TF_TEST(ring_allocation_failure),
        TF_TEST(cancelled_upload_runs_to_its_end),
        TF_TEST(cancelled_upload_logging_before_its_copy_returns),
        TF_TEST(cancelled_upload_logging_after_its_copy_returns),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
