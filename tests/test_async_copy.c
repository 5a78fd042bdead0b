/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Asynchronous copies between device memory and page-locked host memory the
 * runtime tracks: tf_download_async, tf_upload_async (the pool behind them:
 * test_host_memory.c). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/test_support.h"
#include "support/transfer_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static void *host_alloc(tf_runtime *rt, size_t bytes) {
    void *p = NULL;
    assert_ok(tf_host_alloc(rt, bytes, &p));
    return p;
}

/* Every size and offset crosses words and pages differently. */
static void round_trips_at_odd_sizes_and_offsets(void **state) {
    static const size_t sizes[] = {1, 3, 4095, 4097, 65537, MiB + 7};
    static const size_t offsets[] = {0, 1, 13, 4096};
    tf_runtime *rt = new_runtime();
    size_t i, j;
    (void)state;
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        for (j = 0; j < sizeof offsets / sizeof offsets[0]; ++j) {
            const size_t n = sizes[i], off = offsets[j];
            unsigned char *src = host_alloc(rt, n + off), *dst = host_alloc(rt, n + off);
            uint64_t d = lib_alloc(rt, n + off);
            const uint32_t seed = (uint32_t)(i * 10 + j);
            fill_pattern(src + off, n, seed);
            memset(dst, 0, n + off);
            assert_ok(tf_upload_async(rt, src + off, d + off, n));
            assert_ok(tf_download_async(rt, d + off, dst + off, n));
            assert_ok(tf_runtime_sync(rt));
            assert_pattern(dst + off, n, seed);
            if (off) assert_int_equal(dst[off - 1], 0);
            lib_free(rt, d);
            assert_ok(tf_host_free(rt, src));
            assert_ok(tf_host_free(rt, dst));
        }
    }
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

/* The calls return once queued; completion is observed through an event. */
static void copies_return_at_once_and_complete_in_order(void **state) {
    tf_runtime *rt = new_runtime();
    const size_t n = 64 * KiB;
    unsigned char *host = host_alloc(rt, n), *back = host_alloc(rt, n);
    uint64_t d = lib_alloc(rt, n);
    tf_event *ev = NULL;
    void *stream = NULL;
    int32_t done = -1;
    (void)state;
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_ok(tf_event_new(rt, &ev));
    assert_ok(tf_runtime_sync(rt));
    fill_pattern(host, n, 3);
    memset(back, 0, n);
    assert_ok(tf_upload_async(rt, host, d, n));
    assert_ok(tf_download_async(rt, d, back, n)); /* ordered after the upload */
    assert_ok(tf_event_record(rt, ev));
    if (tfd()) {
        assert_int_equal(tfd()->tfd_pending(stream), 3); /* nothing ran yet */
        assert_ok(tf_event_query(ev, &done));
        assert_int_equal(done, 0);
    }
    assert_ok(tf_event_synchronize(ev));
    assert_ok(tf_event_query(ev, &done));
    assert_int_equal(done, 1);
    assert_pattern(back, n, 3);
    assert_ok(tf_event_release(ev));
    lib_free(rt, d);
    assert_ok(tf_host_free(rt, host));
    assert_ok(tf_host_free(rt, back));
    assert_ok(tf_runtime_release(rt));
}

static void registered_memory_is_accepted(void **state) {
    tf_runtime *rt = new_runtime();
    const size_t n = 3 * 4096;
    unsigned char *mem = NULL, expected[3 * 4096];
    uint64_t d = lib_alloc(rt, n);
    (void)state;
    assert_int_equal(posix_memalign((void **)&mem, 4096, n), 0);
    fill_pattern(expected, n, 21);
    assert_ok(tf_host_register(rt, mem, n));
    fill_pattern(mem, n, 21);
    assert_ok(tf_upload_async(rt, mem, d, n));
    assert_ok(tf_runtime_sync(rt));
    memset(mem, 0, n);
    assert_ok(tf_download_async(rt, d + 5, mem + 5, n - 5));
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(mem[4], 0);
    assert_memory_equal(mem + 5, expected + 5, n - 5);
    assert_failure(tf_download_async(rt, d, mem + 1, n), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_async", "crosses the end of its registered range");
    assert_ok(tf_host_unregister(rt, mem));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(mem);
}

static void untracked_host_memory_is_refused(void **state) {
    tf_runtime *rt = new_runtime(), *other = new_runtime();
    const size_t n = 4 * KiB;
    unsigned char *pageable = malloc(n), *block = host_alloc(rt, 100);
    unsigned char *foreign = host_alloc(other, n), *freed = host_alloc(rt, n);
    void *pinned = pinned_alloc(rt, n);
    uint64_t d = lib_alloc(rt, n);
    (void)state;
    assert_ok(tf_host_free(rt, freed));
    assert_failure(tf_download_async(rt, d, pageable, n), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_async", "dst ", "tf_host_alloc", "tf_host_register");
    assert_failure(tf_upload_async(rt, pageable, d, n), TF_ERROR_INVALID_ARGUMENT,
                   "tf_upload_async", "src ", "tf_host_alloc", "tf_host_register");
    /* page-locked, but not through this runtime: no use could be tracked */
    assert_failure(tf_download_async(rt, d, pinned, n), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_async", "tf_host_alloc");
    assert_failure(tf_download_async(rt, d, foreign, n), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_async", "tf_host_alloc");
    assert_failure(tf_upload_async(rt, freed, d, n), TF_ERROR_INVALID_ARGUMENT, "tf_upload_async",
                   "is not inside a live tf_host_alloc block");
    /* the bytes asked for, not the class, bound the range */
    assert_failure(tf_download_async(rt, d, block, 101), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_async", "crosses the end of its tf_host_alloc block");
    assert_failure(tf_upload_async(rt, block + 100, d, 1), TF_ERROR_INVALID_ARGUMENT,
                   "tf_upload_async", "crosses the end");
    assert_failure(tf_download_async(rt, d, NULL, n), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_async", "dst is NULL");
    assert_failure(tf_upload_async(rt, NULL, d, n), TF_ERROR_INVALID_ARGUMENT, "tf_upload_async",
                   "src is NULL");
    /* the device range is checked as tf_download checks it */
    assert_failure(tf_download_async(rt, 0x1234, block, 8), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_async", "is not device memory");
    assert_failure(tf_upload_async(rt, block, d + n - 4, 8), TF_ERROR_INVALID_ARGUMENT,
                   "tf_upload_async", "crosses the end of its allocation");
    assert_ok(tf_download_async(rt, 0, NULL, 0));
    assert_ok(tf_upload_async(rt, NULL, 0, 0));
    assert_null(raw_current_context());
    lib_free(rt, d);
    pinned_free(rt, pinned);
    assert_ok(tf_host_free(rt, block));
    assert_ok(tf_host_free(other, foreign));
    assert_ok(tf_runtime_release(other));
    assert_ok(tf_runtime_release(rt));
    free(pageable);
}

static void failed_submissions_queue_nothing(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    unsigned char *block = host_alloc(rt, 4 * KiB);
    uint64_t d = lib_alloc(rt, 4 * KiB);
    void *stream = NULL;
    tf_host_pool_stats s;
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_ok(tf_runtime_sync(rt));
    INJECT("cuMemcpyDtoHAsync", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_download_async(rt, d, block, 8), TF_ERROR_CUDA, "tf_download_async",
                   "cuMemcpyDtoHAsync failed");
    INJECT("cuMemcpyHtoDAsync", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_upload_async(rt, block, d, 8), TF_ERROR_CUDA, "tf_upload_async",
                   "cuMemcpyHtoDAsync failed");
    assert_int_equal(tfd()->tfd_pending(stream), 0);
    assert_ok(tf_host_free(rt, block));
    tf_host_pool_stats_init(&s, sizeof s);
    assert_ok(tf_host_stats(rt, &s));
    /* the failed copies still counted as uses: the free waits (harmless) */
    assert_int_equal(s.blocks_cached, 1);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* ---- a free racing a copy ------------------------------------------------------- */

struct racing_copy {
    tf_runtime *rt;
    uint64_t dev;
    void *dst;
    tf_status status;
};

static void *copy_into_block(void *arg) {
    struct racing_copy *c = arg;
    c->status = tf_download_async(c->rt, c->dev, c->dst, 4 * KiB);
    if (c->status == TF_OK) c->status = tf_runtime_sync(c->rt); /* its own slot */
    return NULL;
}

/* One round: the copy is held inside cuMemcpyDtoHAsync (a delay of the
 * double), long after it found its block, while this thread frees the block.
 * Returns 1 when the copy found the block first (the free then waited: its
 * event is logged after the copy), 0 when the free came first (the copy was
 * refused, as for any freed block). */
static int race_a_free_against_a_copy(tf_runtime *rt) {
    struct racing_copy c = {rt, lib_alloc(rt, 4 * KiB), host_alloc(rt, 4 * KiB), TF_OK};
    const unsigned long gets = tfd()->tfd_calls("cuCtxGetCurrent");
    const size_t from = tfd()->tfd_log_count();
    pthread_t t;
    char log[512];
    const char *copy, *record;
    assert_ok(tf_runtime_sync(rt));
    tfd()->tfd_set_entry_delay_us("cuMemcpyDtoHAsync", 300000);
    assert_int_equal(pthread_create(&t, NULL, copy_into_block, &c), 0);
    while (tfd()->tfd_calls("cuCtxGetCurrent") == gets) usleep(1000); /* the copy's call began */
    usleep(50000); /* past its lookup, inside the held driver call */
    assert_ok(tf_host_free(rt, c.dst));
    assert_int_equal(pthread_join(t, NULL), 0);
    tfd()->tfd_set_entry_delay_us("cuMemcpyDtoHAsync", 0);
    assert_ok(tf_runtime_sync(rt));
    lib_free(rt, c.dev);
    if (c.status != TF_OK) {
        assert_int_equal(c.status, TF_ERROR_INVALID_ARGUMENT);
        return 0;
    }
    tfd()->tfd_log_format(log, sizeof log, from);
    copy = strstr(log, "cuMemcpyDtoHAsync");
    record = strstr(log, "cuEventRecord");
    assert_non_null(copy);
    assert_non_null(record);
    assert_true(copy < record);
    return 1;
}

/* A tf_host_free that races a tf_download_async into its block, once the
 * copy found the block, waits until the copy is queued: the event the free
 * records comes after the copy, so the block is not handed out again before
 * the copy ran (transfer/host_pool.h, "Locking"). */
static void a_racing_free_waits_for_the_copy(void **state) {
    tf_runtime *rt;
    int won = 0, round;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    for (round = 0; round < 5 && won < 2; ++round) won += race_a_free_against_a_copy(rt);
    assert_true(won > 0); /* the copy found its block first at least once */
    assert_ok(tf_runtime_release(rt));
}

/* ---- 32 threads ------------------------------------------------------------------ */

enum { kThreads = 32, kRounds = 40 };

struct worker {
    tf_runtime *rt;
    uint64_t dev; /* 64 KiB of device memory of its own */
    int index;
    int failures;
};

static void *stress_worker(void *arg) {
    struct worker *w = arg;
    unsigned char *pageable = malloc(64 * KiB);
    int r;
    for (r = 0; r < kRounds; ++r) {
        const size_t n = (size_t)((w->index * 131 + r * 977) % (60 * 1024)) + 1;
        const uint32_t seed = (uint32_t)(w->index * 1000 + r);
        unsigned char *a = NULL, *b = NULL;
        if (tf_host_alloc(w->rt, n, (void **)&a) != TF_OK ||
            tf_host_alloc(w->rt, n + 17, (void **)&b) != TF_OK) {
            ++w->failures;
            break;
        }
        fill_pattern(a, n, seed);
        if (r % 2 == 0) {
            /* asynchronous both ways, completed by the slot's sync */
            if (tf_upload_async(w->rt, a, w->dev, n) != TF_OK ||
                tf_download_async(w->rt, w->dev, b + 17, n) != TF_OK ||
                tf_runtime_sync(w->rt) != TF_OK)
                ++w->failures;
        } else {
            /* the synchronous calls, with pageable memory too */
            memcpy(pageable, a, n);
            if (tf_upload(w->rt, pageable, w->dev, n) != TF_OK ||
                tf_download_async(w->rt, w->dev, b + 17, n) != TF_OK ||
                tf_download(w->rt, w->dev, pageable, n) != TF_OK ||
                pattern_mismatch(pageable, n, seed) != n)
                ++w->failures;
            if (tf_runtime_sync(w->rt) != TF_OK) ++w->failures;
        }
        if (pattern_mismatch(b + 17, n, seed) != n) ++w->failures;
        /* free one block while a copy into it may still be queued */
        if (tf_download_async(w->rt, w->dev, a, n) != TF_OK) ++w->failures;
        if (tf_host_free(w->rt, a) != TF_OK || tf_host_free(w->rt, b) != TF_OK) ++w->failures;
    }
    free(pageable);
    return NULL;
}

static void threads_mix_pool_and_copies(void **state) {
    tf_runtime *rt = new_runtime();
    struct worker workers[kThreads];
    pthread_t threads[kThreads];
    tf_host_pool_stats s;
    int i;
    (void)state;
    if (tfd()) {
        /* streams run by a thread of the double too, as a device would */
        tfd()->tfd_set_execution(TFD_EXEC_BACKGROUND);
        tfd()->tfd_set_background_delay_us(50);
    }
    for (i = 0; i < kThreads; ++i) {
        workers[i].rt = rt;
        workers[i].dev = lib_alloc(rt, 64 * KiB);
        workers[i].index = i;
        workers[i].failures = 0;
    }
    assert_ok(tf_runtime_sync(rt));
    for (i = 0; i < kThreads; ++i)
        assert_int_equal(pthread_create(&threads[i], NULL, stress_worker, &workers[i]), 0);
    for (i = 0; i < kThreads; ++i) assert_int_equal(pthread_join(threads[i], NULL), 0);
    for (i = 0; i < kThreads; ++i) assert_int_equal(workers[i].failures, 0);
    tf_host_pool_stats_init(&s, sizeof s);
    assert_ok(tf_host_stats(rt, &s));
    assert_int_equal(s.blocks_in_use, 0);
    assert_int_equal(s.bytes_in_use, 0);
    /* the cache served most requests */
    assert_true(s.driver_allocations < (uint64_t)kThreads * kRounds);
    for (i = 0; i < kThreads; ++i) lib_free(rt, workers[i].dev);
    assert_ok(tf_runtime_release(rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(round_trips_at_odd_sizes_and_offsets),
        TF_TEST(copies_return_at_once_and_complete_in_order),
        TF_TEST(registered_memory_is_accepted),
        TF_TEST(untracked_host_memory_is_refused),
        TF_TEST(failed_submissions_queue_nothing),
        TF_TEST(a_racing_free_waits_for_the_copy),
        TF_TEST(threads_mix_pool_and_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
