/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Downloads: tf_download_scalar through the slot's page-locked staging, and
 * tf_download directly into page-locked memory or, for pageable memory,
 * through the slot's staging ring and the runtime's copy threads.  Round
 * trips of every size on the double and on a GPU; every failure injected
 * through the double; what is leaked versus freed. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/raw_memory.h"
#include "support/test_support.h"
#include "support/transfer_support.h"

#define MiB ((size_t)1 << 20)

static long live(int kind) { return tfd() ? tfd()->tfd_live(kind) : 0; }

static size_t call_log(char *buf, size_t cap) { return tfd()->tfd_log_format(buf, cap, 0); }

/* Calls of `entry` in the double's call log (since tfd_log_clear). */
static int logged(const char *entry) {
    size_t i, n = tfd()->tfd_log_count();
    int count = 0;
    for (i = 0; i < n; ++i) count += strcmp(tfd()->tfd_log_name(i), entry) == 0;
    return count;
}

/* ---- round trips ---------------------------------------------------------- */

static const size_t sizes[] = {1, 15, 16, 17, 4096, MiB + 17, 64 * MiB};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Upload a pattern at an offset, then read it back into pageable memory
 * (with a guard after it), page-locked memory and, for small sizes, through
 * the scalar path.  Nothing around the range may change. */
static void round_trip(tf_runtime *rt, size_t n, size_t offset, uint32_t seed) {
    const size_t guard = 64;
    uint64_t d = lib_alloc(rt, n + offset + guard);
    unsigned char *src = malloc(n), *page = malloc(n + guard), *pin = pinned_alloc(rt, n + guard);
    unsigned char scalar[TF_SCALAR_DOWNLOAD_MAX_BYTES + 1];
    assert_non_null(src);
    assert_non_null(page);
    fill_pattern(src, n, seed);
    memset(page, 0xEE, n + guard);
    memset(pin, 0xEE, n + guard);
    assert_ok(tf_upload(rt, src, d + offset, n));
    assert_ok(tf_download(rt, d + offset, page, n));
    assert_pattern(page, n, seed);
    assert_int_equal(page[n], 0xEE);
    assert_int_equal(page[n + guard - 1], 0xEE);
    assert_ok(tf_download(rt, d + offset, pin, n));
    assert_pattern(pin, n, seed);
    assert_int_equal(pin[n], 0xEE);
    if (n <= TF_SCALAR_DOWNLOAD_MAX_BYTES) {
        memset(scalar, 0xEE, sizeof scalar);
        assert_ok(tf_download_scalar(rt, d + offset, scalar, n));
        assert_pattern(scalar, n, seed);
        assert_int_equal(scalar[n], 0xEE);
    } else {
        assert_failure(tf_download_scalar(rt, d + offset, scalar, n), TF_ERROR_INVALID_ARGUMENT,
                       "tf_download_scalar", "over TF_SCALAR_DOWNLOAD_MAX_BYTES");
    }
    pinned_free(rt, pin);
    free(page);
    free(src);
    lib_free(rt, d);
}

static void round_trips(tf_runtime *rt) {
    size_t i;
    for (i = 0; i < NSIZES; ++i) {
        round_trip(rt, sizes[i], 0, (uint32_t)i);
        round_trip(rt, sizes[i], 3, (uint32_t)i + 100);
    }
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

static void round_trips_with_defaults(void **state) {
    (void)state;
    round_trips(new_runtime());
}

/* 64 KiB chunks, 3 threads: many steps, each split over the pool. */
static void round_trips_with_small_chunks(void **state) {
    (void)state;
    round_trips(runtime_with(2, 3, 64 << 10));
}

/* One thread: the caller copies every chunk itself, no pool. */
static void round_trips_with_one_thread(void **state) {
    (void)state;
    round_trips(runtime_with(2, 1, 1 << 20));
}

static void zero_length_touches_nothing(void **state) {
    tf_runtime *rt = new_runtime();
    (void)state;
    if (tfd()) tfd()->tfd_log_clear();
    assert_ok(tf_download(rt, 0, NULL, 0));
    assert_ok(tf_download_scalar(rt, 0, NULL, 0));
    assert_ok(tf_upload(rt, NULL, 0, 0));
    assert_ok(tf_copy(rt, 0, 0, 0));
    if (tfd()) assert_int_equal(tfd()->tfd_log_count(), 0);
    assert_ok(tf_runtime_release(rt));
}

/* ---- ordering ------------------------------------------------------------- */

/* Device work queued on the slot's stream just before a download is seen by
 * it: several large memsets, then each kind of download. */
static void downloads_see_work_queued_before_them(void **state) {
    const size_t n = 64 * MiB;
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, n);
    unsigned char *page = malloc(n), *pin = pinned_alloc(rt, n);
    uint32_t word = 0;
    size_t i;
    int k;
    (void)state;
    assert_non_null(page);
    for (k = 1; k <= 4; ++k) queue_memset(rt, d, (unsigned char)k, n);
    assert_ok(tf_download_scalar(rt, d + n - 4, &word, 4));
    assert_int_equal(word, 0x04040404u);
    for (k = 5; k <= 8; ++k) queue_memset(rt, d, (unsigned char)k, n);
    assert_ok(tf_download(rt, d, page, n));
    for (i = 0; i < n; i += 4093) assert_int_equal(page[i], 8);
    assert_int_equal(page[n - 1], 8);
    for (k = 9; k <= 12; ++k) queue_memset(rt, d, (unsigned char)k, n);
    assert_ok(tf_download(rt, d, pin, n));
    for (i = 0; i < n; i += 4093) assert_int_equal(pin[i], 12);
    assert_int_equal(pin[n - 1], 12);
    pinned_free(rt, pin);
    free(page);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* ---- concurrency ---------------------------------------------------------- */

struct worker {
    tf_runtime *rt;
    int index;
    size_t n;
    unsigned char *pin; /* page-locked, made by the main thread */
    int errors;         /* assertions cannot run on other threads */
    char first_error[256];
};

static void note(struct worker *w, tf_status st, const char *what) {
    if (st == TF_OK) return;
    if (!w->errors++)
        snprintf(w->first_error, sizeof w->first_error, "%s: %s", what, tf_last_error_message());
}

static void *download_loop(void *arg) {
    struct worker *w = arg;
    const uint32_t seed = 1000u + (uint32_t)w->index;
    unsigned char *src = malloc(w->n), *page = malloc(w->n);
    uint64_t d = 0;
    int round;
    if (!src || !page) {
        w->errors++;
        return NULL;
    }
    fill_pattern(src, w->n, seed);
    note(w, tf_alloc(w->rt, w->n, &d), "tf_alloc");
    note(w, tf_upload(w->rt, src, d, w->n), "tf_upload");
    for (round = 0; round < 4 && !w->errors; ++round) {
        uint64_t scalar[2] = {0, 0};
        memset(page, 0, w->n);
        memset(w->pin, 0, w->n);
        note(w, tf_download(w->rt, d, page, w->n), "tf_download pageable");
        note(w, tf_download(w->rt, d, w->pin, w->n), "tf_download page-locked");
        note(w, tf_download_scalar(w->rt, d + w->n - 16, scalar, 16), "tf_download_scalar");
        if (pattern_mismatch(page, w->n, seed) != w->n)
            note(w, TF_ERROR_INTERNAL, "pageable bytes");
        if (pattern_mismatch(w->pin, w->n, seed) != w->n)
            note(w, TF_ERROR_INTERNAL, "page-locked bytes");
        if (memcmp(scalar, src + w->n - 16, 16) != 0) note(w, TF_ERROR_INTERNAL, "scalar bytes");
    }
    note(w, tf_free(w->rt, d), "tf_free");
    note(w, tf_runtime_sync(w->rt), "tf_runtime_sync");
    free(page);
    free(src);
    return NULL;
}

static void threads_download_at_once(int threads, uint32_t slots, size_t n) {
    enum { MAX = 24 };
    tf_runtime *rt = runtime_with(slots, 4, 256 << 10);
    struct worker w[MAX];
    pthread_t th[MAX];
    int i;
    assert_true(threads <= MAX);
    for (i = 0; i < threads; ++i) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].rt = rt;
        w[i].index = i;
        w[i].n = n + 4096 * (size_t)i + 5;
        w[i].pin = pinned_alloc(rt, w[i].n);
    }
    for (i = 0; i < threads; ++i)
        assert_int_equal(pthread_create(&th[i], NULL, download_loop, &w[i]), 0);
    for (i = 0; i < threads; ++i) pthread_join(th[i], NULL);
    for (i = 0; i < threads; ++i) {
        if (w[i].errors) fail_msg("thread %d: %s", i, w[i].first_error);
        pinned_free(rt, w[i].pin);
    }
    assert_ok(tf_runtime_release(rt));
}

static void eight_threads_on_eight_slots(void **state) {
    (void)state;
    threads_download_at_once(8, 8, 3 * MiB);
}

static void eight_threads_sharing_two_slots(void **state) {
    (void)state;
    threads_download_at_once(8, 2, 3 * MiB);
}

/* More downloads at once than the copy pool offers to its threads (16):
 * the rest are copied by their callers alone, and all arrive. */
static void twenty_four_threads_on_twenty_four_slots(void **state) {
    (void)state;
    threads_download_at_once(24, 24, MiB);
}

/* ---- what each path costs in driver calls (double) ------------------------ */

/* On an idle stream (here the double runs every op at once) a scalar read
 * is a copy and a flag write, after one query; test_scalar_read.c covers
 * the other paths. */
static void scalar_is_a_query_a_copy_and_a_flag(void **state) {
    tf_runtime *rt;
    uint64_t d;
    uint32_t value = 0x11223344u, got = 0;
    void *primary = NULL;
    char log[512];
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_execution(TFD_EXEC_SYNC);
    rt = new_runtime();
    d = lib_alloc(rt, 64);
    assert_ok(tf_upload(rt, &value, d + 8, 4));
    assert_ok(tf_download_scalar(rt, d + 8, &got, 4)); /* allocates the mailbox */
    assert_int_equal(got, value);
    tfd()->tfd_log_clear();
    got = 0;
    assert_ok(tf_download_scalar(rt, d + 8, &got, 4));
    assert_int_equal(got, value);
    call_log(log, sizeof log);
    assert_string_equal(log,
                        "cuCtxGetCurrent,cuCtxSetCurrent,cuStreamQuery,"
                        "cuMemcpyDtoHAsync,cuStreamWriteValue32,cuCtxSetCurrent");
    /* With the primary context already current: the fast path. */
    assert_ok(tf_runtime_primary_context(rt, &primary));
    raw_set_current_context(primary);
    tfd()->tfd_log_clear();
    assert_ok(tf_download_scalar(rt, d + 8, &got, 4));
    call_log(log, sizeof log);
    assert_string_equal(log,
                        "cuCtxGetCurrent,cuStreamQuery,cuMemcpyDtoHAsync,"
                        "cuStreamWriteValue32");
    assert_ptr_equal(raw_current_context(), primary);
    raw_set_current_context(NULL);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* One page-locked, not write-combined mailbox per slot, made once. */
static void scalar_staging_is_per_slot_and_made_once(void **state) {
    tf_runtime *rt, *slot1 = NULL;
    uint64_t d;
    long before;
    uint16_t v = 0;
    int i;
    (void)state;
    REQUIRE_DOUBLE();
    before = live(TFD_HOST_ALLOCS);
    rt = new_runtime_with_slots(2);
    assert_ok(tf_runtime_bind_slot(rt, 1, &slot1));
    d = lib_alloc(rt, 16);
    assert_ok(tf_runtime_sync(rt));
    tfd()->tfd_log_clear();
    for (i = 0; i < 5; ++i) {
        assert_ok(tf_download_scalar(rt, d, &v, 2));
        assert_ok(tf_download_scalar(slot1, d + 2, &v, 2));
    }
    assert_int_equal(logged("cuMemHostAlloc"), 2);
    assert_int_equal(live(TFD_HOST_ALLOCS) - before, 2);
    assert_ok(tf_runtime_release(slot1));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(live(TFD_HOST_ALLOCS), before); /* freed at teardown */
}

/* The staging the host reads must not be write-combined (reads of such
 * memory are uncached): the scalar mailbox (mapped for the device) and
 * every ring buffer. */
static void staging_is_not_write_combined(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    enum { CAP = 256 };
    static void *before[CAP], *after[CAP];
    static unsigned flags[CAP];
    tf_runtime *rt;
    uint64_t d;
    unsigned char *buf = malloc(MiB);
    size_t nb, na, i, j, fresh = 0, mapped = 0;
    rt = new_runtime();
    d = lib_alloc(rt, MiB);
    nb = tfd()->tfd_host_allocs(before, NULL, CAP);
    assert_ok(tf_download_scalar(rt, d, buf, 1));
    assert_ok(tf_download(rt, d, buf, MiB));
    na = tfd()->tfd_host_allocs(after, flags, CAP);
    assert_true(na <= CAP);
    assert_true(na >= nb + 3); /* the mailbox and a ring of two or more */
    for (i = 0; i < na; ++i) {
        int known = 0;
        for (j = 0; j < nb; ++j) known |= after[i] == before[j];
        if (known) continue;
        ++fresh;
        /* no CU_MEMHOSTALLOC_WRITECOMBINED, nothing else */
        mapped += flags[i] == CU_MEMHOSTALLOC_DEVICEMAP;
        assert_true(flags[i] == 0 || flags[i] == CU_MEMHOSTALLOC_DEVICEMAP);
    }
    assert_int_equal(fresh, na - nb);
    assert_int_equal(mapped, 1);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(buf);
}

static void page_locked_destination_is_written_directly(void **state) {
    const size_t n = 2 * MiB;
    tf_runtime *rt;
    uint64_t d;
    void *pin;
    char log[512];
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    d = lib_alloc(rt, n);
    pin = pinned_alloc(rt, n);
    assert_ok(tf_download(rt, d, pin, n));
    tfd()->tfd_log_clear();
    assert_ok(tf_download(rt, d, pin, n));
    call_log(log, sizeof log);
    assert_string_equal(log,
                        "cuCtxGetCurrent,cuCtxSetCurrent,cuStreamIsCapturing,"
                        "cuPointerGetAttribute,cuMemcpyDtoHAsync,cuStreamSynchronize,"
                        "cuCtxSetCurrent");
    pinned_free(rt, pin);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* Small pageable downloads use the driver's own copy: no staging. */
static void small_pageable_download_uses_the_driver(void **state) {
    tf_runtime *rt;
    uint64_t d;
    static unsigned char buf[64 << 10];
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    d = lib_alloc(rt, sizeof buf);
    tfd()->tfd_log_clear();
    assert_ok(tf_download(rt, d, buf, sizeof buf));
    assert_int_equal(logged("cuMemHostAlloc"), 0);
    assert_int_equal(logged("cuMemcpyDtoHAsync"), 1);
    assert_int_equal(logged("cuStreamSynchronize"), 1);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* The ring's depth, from a download that allocated it: as many buffers
 * as events, at least two (the device fills one while the host empties
 * another). */
static int ring_depth_in_log(void) {
    const int buffers = logged("cuMemHostAlloc");
    assert_int_equal(logged("cuEventCreate"), buffers);
    assert_true(buffers >= 2);
    return buffers;
}

/* Walks the call log of one staged download of `steps` steps: every device
 * copy is followed by its event record; at least two copies are queued
 * before the first wait (device and host overlap); when the wait for step
 * k starts, step k is queued and no more than `depth` steps beyond those
 * already copied out (a buffer is never refilled before it is emptied). */
static void assert_pipelined(int steps, int depth) {
    size_t i, n = tfd()->tfd_log_count();
    int queued = 0, waits = 0;
    for (i = 0; i < n; ++i) {
        const char *name = tfd()->tfd_log_name(i);
        if (strcmp(name, "cuMemcpyDtoHAsync") == 0) {
            ++queued;
            assert_true(i + 1 < n);
            assert_string_equal(tfd()->tfd_log_name(i + 1), "cuEventRecord");
        } else if (strcmp(name, "cuEventSynchronize") == 0) {
            if (waits == 0) assert_true(queued >= (steps < 2 ? steps : 2));
            assert_true(queued >= waits + 1);
            assert_true(queued <= waits + depth);
            ++waits;
        }
    }
    assert_int_equal(queued, steps);
    assert_int_equal(waits, steps);
    assert_int_equal(logged("cuEventRecord"), steps);
    assert_int_equal(logged("cuStreamSynchronize"), 0);
}

/* Large pageable downloads go through the slot's staging ring: later steps
 * are queued while earlier ones are copied out. */
static void large_pageable_download_is_pipelined(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    const size_t chunk = 64 << 10, n = 10 * chunk + 100;
    tf_runtime *rt;
    uint64_t d;
    unsigned char *src = malloc(n), *dst = malloc(n);
    long hosts, events;
    int depth;
    hosts = live(TFD_HOST_ALLOCS);
    events = live(TFD_EVENTS);
    rt = runtime_with(1, 2, (uint32_t)chunk);
    d = lib_alloc(rt, n);
    fill_pattern(src, n, 7);
    tfd()->tfd_log_clear();
    assert_ok(tf_upload(rt, src, d, n)); /* staged: allocates the ring downloads use too */
    depth = ring_depth_in_log();
    tfd()->tfd_log_clear();
    assert_ok(tf_download(rt, d, dst, n));
    assert_pattern(dst, n, 7);
    assert_int_equal(logged("cuMemHostAlloc"), 0);
    /* 11 steps: no step is longer than a chunk, and equal steps need 11. */
    assert_pipelined(11, depth);
    assert_int_equal(live(TFD_HOST_ALLOCS) - hosts, depth);
    assert_int_equal(live(TFD_EVENTS) - events, depth);
    tfd()->tfd_log_clear();
    assert_ok(tf_download(rt, d, dst, n)); /* the ring is reused */
    assert_int_equal(logged("cuMemHostAlloc"), 0);
    assert_pipelined(11, depth);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(live(TFD_HOST_ALLOCS), hosts);
    assert_int_equal(live(TFD_EVENTS), events);
    free(dst);
    free(src);
}

static int steps_of(tf_runtime *rt, uint64_t d, unsigned char *dst, size_t n) {
    tfd()->tfd_log_clear();
    assert_ok(tf_download(rt, d, dst, n));
    return logged("cuMemcpyDtoHAsync");
}

/* Steps are never longer than a chunk and never shorter than 64 KiB, and a
 * longer download is cut into at least as many steps as a shorter one. */
static void downloads_are_cut_into_steps(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    const size_t big = 64 * MiB;
    tf_runtime *rt, *small;
    uint64_t d, ds;
    unsigned char *dst = malloc(big);
    int two, sixty_four;
    rt = new_runtime(); /* TF_DEFAULT_DOWNLOAD_CHUNK_BYTES */
    d = lib_alloc(rt, big);
    two = steps_of(rt, d, dst, 2 * MiB);
    assert_true(two >= 1 && two <= (int)(2 * MiB / (64 << 10)));
    sixty_four = steps_of(rt, d, dst, big);
    assert_true(sixty_four >= (int)(big / TF_DEFAULT_DOWNLOAD_CHUNK_BYTES));
    assert_true(sixty_four >= two);
    assert_int_equal(steps_of(rt, d, dst, (64 << 10) + 1), 1);
    small = runtime_with(1, 3, 64 << 10);
    ds = lib_alloc(small, 2 * MiB + 4096);
    assert_int_equal(steps_of(small, ds, dst, 2 * MiB), 32);
    assert_int_equal(steps_of(small, ds, dst, 2 * MiB + 1), 33);
    lib_free(small, ds);
    assert_ok(tf_runtime_release(small));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(dst);
}

/* ---- bad input ------------------------------------------------------------ */

static void scalar_rejects_bad_input(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 32);
    unsigned char out[32], host[64];
    (void)state;
    memset(out, 0xAB, sizeof out);
    assert_failure(tf_download_scalar(rt, d, NULL, 4), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_scalar", "out is NULL");
    assert_failure(tf_download_scalar(rt, d, out, 17), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_scalar", "len 17 is over TF_SCALAR_DOWNLOAD_MAX_BYTES (16)");
    assert_failure(tf_download_scalar(rt, (uint64_t)(uintptr_t)host, out, 4),
                   TF_ERROR_INVALID_ARGUMENT, "tf_download_scalar", "src 0x",
                   "is not device memory");
    assert_string_equal(tf_last_error_call(), "cuMemGetAddressRange");
    assert_failure(tf_download_scalar(rt, d + 20, out, 16), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_scalar", "crosses the end of its allocation");
    assert_int_equal(out[0], 0xAB); /* nothing written */
    assert_null(raw_current_context());
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

static void download_rejects_bad_input(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 4096), other = lib_alloc(rt, 64);
    unsigned char out[8192];
    (void)state;
    memset(out, 0xAB, sizeof out);
    assert_failure(tf_download(rt, d, NULL, 4), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "dst is NULL");
    assert_failure(tf_download(rt, d + 1, out, 4096), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "crosses the end of its allocation");
    assert_failure(tf_download(rt, d, out, SIZE_MAX), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "crosses the end");
    assert_failure(tf_download(rt, (uint64_t)(uintptr_t)out, out + 4096, 16),
                   TF_ERROR_INVALID_ARGUMENT, "tf_download", "is not device memory");
    assert_failure(tf_download(rt, d, (void *)(uintptr_t)other, 16), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download", "dst", "is device memory");
    assert_int_equal(out[0], 0xAB);
    assert_null(raw_current_context());
    lib_free(rt, other);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* Memory of another device: the double has two. */
static void memory_of_another_device_is_refused(void **state) {
    tf_runtime *rt0, *rt1;
    uint64_t d1;
    unsigned char out[16];
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_devices(2);
    rt0 = new_runtime();
    assert_ok(tf_runtime_new(1, &rt1));
    d1 = lib_alloc(rt1, 64);
    assert_failure(tf_download_scalar(rt0, d1, out, 4), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_scalar", "is memory of device 1; this runtime is on device 0");
    assert_failure(tf_download(rt0, d1, out, 16), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "device 1");
    assert_failure(tf_upload(rt0, out, d1, 16), TF_ERROR_INVALID_ARGUMENT, "tf_upload", "dst 0x",
                   "device 1");
    assert_failure(tf_free(rt0, d1), TF_ERROR_INVALID_ARGUMENT, "tf_free", "device 1");
    assert_ok(tf_download_scalar(rt1, d1, out, 4));
    lib_free(rt1, d1);
    assert_ok(tf_runtime_release(rt1));
    assert_ok(tf_runtime_release(rt0));
}

/* ---- injected failures: scalar ------------------------------------------- */

struct fixture {
    tf_runtime *rt;
    uint64_t d;
    long hosts, events;
};

static void setup_fixture_with(struct fixture *f, size_t bytes, uint32_t threads) {
    uint32_t v = 0xCAFEF00Du;
    f->hosts = live(TFD_HOST_ALLOCS);
    f->events = live(TFD_EVENTS);
    f->rt = runtime_with(1, threads, 64 << 10);
    f->d = lib_alloc(f->rt, bytes);
    assert_ok(tf_upload(f->rt, &v, f->d, 4));
}

static void setup_fixture(struct fixture *f, size_t bytes) { setup_fixture_with(f, bytes, 2); }

static void scalar_staging_allocation_failure(void **state) {
    struct fixture f;
    uint32_t out = 7;
    (void)state;
    REQUIRE_DOUBLE();
    setup_fixture(&f, 64);
    tfd()->tfd_log_clear();
    INJECT("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_download_scalar(f.rt, f.d, &out, 4), TF_ERROR_OUT_OF_MEMORY,
                   "tf_download_scalar", "cuMemHostAlloc failed", "CUDA_ERROR_OUT_OF_MEMORY (2)");
    assert_int_equal(out, 7);
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
    assert_int_equal(logged("cuMemcpyDtoHAsync"), 0);
    assert_null(raw_current_context());
    assert_ok(tf_download_scalar(f.rt, f.d, &out, 4)); /* tried again */
    assert_int_equal(out, 0xCAFEF00Du);
    lib_free(f.rt, f.d);
    assert_ok(tf_runtime_release(f.rt));
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
}

/* A failed copy or wait abandons the staging: it is never freed or reused;
 * the next call makes another. */
static void scalar_failure_abandons_staging(const char *entry, int code, tf_status expected) {
    struct fixture f;
    uint32_t out = 7;
    void *other = raw_create_context();
    const long reclaimed_hosts = tfd()->tfd_reclaimed(TFD_HOST_ALLOCS);
    setup_fixture(&f, 64);
    assert_ok(tf_download_scalar(f.rt, f.d, &out, 4)); /* staging made */
    assert_int_equal(live(TFD_HOST_ALLOCS) - f.hosts, 1);
    out = 7;
    raw_set_current_context(other);
    INJECT(entry, 1, code, 1);
    assert_failure(tf_download_scalar(f.rt, f.d, &out, 4), expected, "tf_download_scalar", entry,
                   "failed");
    assert_int_equal(tf_last_error_code(), code);
    assert_string_equal(tf_last_error_call(), entry);
    assert_int_equal(out, 7);
    assert_ptr_equal(raw_current_context(), other); /* the caller's context is back */
    raw_set_current_context(NULL);
    tfd()->tfd_log_clear();
    assert_ok(tf_download_scalar(f.rt, f.d, &out, 4));
    assert_int_equal(out, 0xCAFEF00Du);
    assert_int_equal(logged("cuMemHostAlloc"), 1); /* a fresh buffer */
    assert_int_equal(live(TFD_HOST_ALLOCS) - f.hosts, 2);
    lib_free(f.rt, f.d);
    assert_ok(tf_runtime_release(f.rt));
    /* Teardown frees the live buffer; the abandoned one was never freed,
     * and went with the context. */
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
    assert_int_equal(tfd()->tfd_reclaimed(TFD_HOST_ALLOCS) - reclaimed_hosts, 1);
    raw_destroy_context(other);
}

static void scalar_copy_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    scalar_failure_abandons_staging("cuMemcpyDtoHAsync", CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

static void scalar_wait_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    scalar_failure_abandons_staging("cuStreamSynchronize", CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

/* The queries run on memory the library did not allocate (its own
 * allocations need no address query). */
static void query_failure(const char *op, tf_status (*call)(struct fixture *, void *),
                          const char *entry, unsigned long nth) {
    struct fixture f;
    unsigned char out[4096];
    setup_fixture(&f, sizeof out);
    lib_free(f.rt, f.d);
    f.d = dev_alloc(f.rt, sizeof out);
    memset(out, 0x5C, sizeof out);
    tfd()->tfd_log_clear();
    INJECT(entry, nth, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(call(&f, out), TF_ERROR_CUDA, op, entry, "failed", "CUDA_ERROR_UNKNOWN (999)");
    assert_int_equal(logged("cuMemcpyDtoHAsync"), 0); /* nothing queued */
    assert_int_equal(out[0], 0x5C);
    assert_null(raw_current_context());
    dev_free(f.rt, f.d);
    assert_ok(tf_runtime_release(f.rt));
}

static tf_status scalar_call(struct fixture *f, void *out) {
    return tf_download_scalar(f->rt, f->d, out, 4);
}
static tf_status bulk_call(struct fixture *f, void *out) {
    return tf_download(f->rt, f->d, out, 4096);
}

static void address_range_query_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    query_failure("tf_download_scalar", scalar_call, "cuMemGetAddressRange", 1);
    query_failure("tf_download", bulk_call, "cuMemGetAddressRange", 1);
}

/* The library's own allocations are answered from its registry, without
 * the address query; a freed one is refused again, by the driver. */
static void own_allocations_need_no_address_query(void **state) {
    tf_runtime *rt;
    uint64_t d, foreign;
    uint32_t v = 0;
    unsigned char back[64];
    unsigned long before;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    d = lib_alloc(rt, 64);
    foreign = dev_alloc(rt, 64);
    assert_ok(tf_upload(rt, &v, d, 4));
    before = tfd()->tfd_calls("cuMemGetAddressRange");
    assert_ok(tf_download_scalar(rt, d + 4, &v, 4));
    assert_ok(tf_download(rt, d, back, 64));
    assert_ok(tf_upload(rt, back, d + 32, 32));
    assert_int_equal(tfd()->tfd_calls("cuMemGetAddressRange"), before);
    assert_failure(tf_download(rt, d + 32, back, 33), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "crosses the end of its allocation");
    assert_int_equal(tfd()->tfd_calls("cuMemGetAddressRange"), before);
    /* Foreign memory is still asked of the driver, every time. */
    assert_ok(tf_download_scalar(rt, foreign, &v, 4));
    assert_ok(tf_download_scalar(rt, foreign, &v, 4));
    assert_int_equal(tfd()->tfd_calls("cuMemGetAddressRange"), before + 2);
    /* Freed: the registry no longer answers; once the stream-ordered free
     * has run, the driver refuses it again. */
    lib_free(rt, d);
    assert_ok(tf_runtime_sync(rt));
    assert_failure(tf_download_scalar(rt, d + 4, &v, 4), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_scalar", "is not device memory");
    assert_failure(tf_download(rt, d, back, 64), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "is not device memory");
    assert_int_equal(tfd()->tfd_calls("cuMemGetAddressRange"), before + 4);
    dev_free(rt, foreign);
    assert_ok(tf_runtime_release(rt));
}

/* tf_alloc memory is the device pool's, known to every runtime of the
 * device while one lives; the last runtime's teardown forgets it with the
 * pool (its primary context, and the allocations in it, may go then).  A
 * later runtime reaches memory still allocated, through the driver. */
static void teardown_forgets_the_runtimes_allocations(void **state) {
    tf_runtime *kept, *gone;
    uint64_t d;
    uint32_t v = 0x1234u, got = 0;
    unsigned long before;
    (void)state;
    REQUIRE_DOUBLE();
    kept = new_runtime();
    gone = new_runtime();
    d = lib_alloc(gone, 16);
    assert_ok(tf_upload(gone, &v, d, 4));
    assert_ok(tf_runtime_sync(gone));
    before = tfd()->tfd_calls("cuMemGetAddressRange");
    assert_ok(tf_download_scalar(kept, d, &got, 4)); /* any runtime of the device */
    assert_ok(tf_runtime_release(gone));
    got = 0;
    assert_ok(tf_download_scalar(kept, d, &got, 4));
    assert_int_equal(got, v);
    assert_int_equal(tfd()->tfd_calls("cuMemGetAddressRange"), before);
    /* The last runtime goes, the context stays (held here). */
    raw_retain_primary(0);
    assert_ok(tf_runtime_release(kept));
    kept = new_runtime();
    got = 0;
    assert_ok(tf_download_scalar(kept, d, &got, 4));
    assert_int_equal(got, v);
    assert_int_equal(tfd()->tfd_calls("cuMemGetAddressRange"), before + 1);
    lib_free(kept, d);
    assert_ok(tf_runtime_release(kept));
    raw_release_primary(0);
}

static void pointer_attribute_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    query_failure("tf_download", bulk_call, "cuPointerGetAttribute", 1); /* dst kind */
    tfd()->tfd_set_devices(2); /* now the device of every address is asked too */
    query_failure("tf_download_scalar", scalar_call, "cuPointerGetAttribute", 1);
    query_failure("tf_download", bulk_call, "cuPointerGetAttribute", 1); /* src device */
    query_failure("tf_download", bulk_call, "cuPointerGetAttribute", 2); /* dst kind */
}

/* The device of an address the library did not allocate is asked only
 * where the process sees several devices; a failed count means "ask", and
 * is asked again next time. */
static void device_query_only_with_several_devices(void **state) {
    tf_runtime *rt;
    uint64_t d;
    uint32_t v = 0;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    d = dev_alloc(rt, 4);
    INJECT("cuDeviceGetCount", 1, CUDA_ERROR_UNKNOWN, 1);
    tfd()->tfd_log_clear();
    assert_ok(tf_download_scalar(rt, d, &v, 4));
    assert_int_equal(logged("cuDeviceGetCount"), 1);
    assert_int_equal(logged("cuPointerGetAttribute"), 1);
    tfd()->tfd_log_clear();
    assert_ok(tf_download_scalar(rt, d, &v, 4));
    assert_ok(tf_download_scalar(rt, d, &v, 4));
    assert_int_equal(logged("cuDeviceGetCount"), 1); /* asked again, then kept */
    assert_int_equal(logged("cuPointerGetAttribute"), 0);
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    tfd()->tfd_set_devices(2);
    rt = new_runtime();
    d = dev_alloc(rt, 4);
    assert_ok(tf_download_scalar(rt, d, &v, 4));
    tfd()->tfd_log_clear();
    assert_ok(tf_download_scalar(rt, d, &v, 4));
    assert_int_equal(logged("cuDeviceGetCount"), 0);
    assert_int_equal(logged("cuPointerGetAttribute"), 1);
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* A sticky fault surfaced by the wait: reported as such, the runtime
 * refuses from then on, and teardown leaks quietly. */
static void scalar_wait_reports_a_device_fault(void **state) {
    struct fixture f;
    uint32_t out = 0;
    const char *warnings;
    (void)state;
    REQUIRE_DOUBLE();
    setup_fixture(&f, 64);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_ILLEGAL_ADDRESS, 1);
    assert_failure(tf_download_scalar(f.rt, f.d, &out, 4), TF_ERROR_DEVICE_FAULT,
                   "tf_download_scalar", "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    assert_failure(tf_download(f.rt, f.d, &out, 4), TF_ERROR_DEVICE_FAULT, "tf_download",
                   "unusable");
    log_capture_start();
    assert_ok(tf_runtime_release(f.rt));
    warnings = log_capture_stop();
    assert_string_equal(warnings, "");
}

/* ---- injected failures: bulk ----------------------------------------------- */

static void ring_allocation_failure(const char *entry, unsigned long nth, int code,
                                    tf_status expected) {
    struct fixture f;
    const size_t n = MiB;
    unsigned char *out = malloc(n);
    setup_fixture(&f, n);
    memset(out, 0x5C, n);
    tfd()->tfd_log_clear();
    INJECT(entry, nth, code, 1);
    assert_failure(tf_download(f.rt, f.d, out, n), expected, "tf_download", entry, "failed");
    assert_int_equal(out[0], 0x5C);
    /* Nothing was queued into what the call made, so it was all freed. */
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
    assert_int_equal(live(TFD_EVENTS), f.events);
    assert_int_equal(logged("cuMemcpyDtoHAsync"), 0);
    assert_null(raw_current_context());
    tfd()->tfd_log_clear();
    assert_ok(tf_download(f.rt, f.d, out, n));
    assert_int_equal(live(TFD_HOST_ALLOCS) - f.hosts, ring_depth_in_log());
    lib_free(f.rt, f.d);
    assert_ok(tf_runtime_release(f.rt));
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
    free(out);
}

static void staging_ring_allocation_failures(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    ring_allocation_failure("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, TF_ERROR_OUT_OF_MEMORY);
    ring_allocation_failure("cuMemHostAlloc", 2, CUDA_ERROR_OUT_OF_MEMORY, TF_ERROR_OUT_OF_MEMORY);
    ring_allocation_failure("cuEventCreate", 1, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
    ring_allocation_failure("cuEventCreate", 2, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

/* A failure inside the pipeline abandons the ring (two buffers, two
 * events): the next download makes a fresh one; teardown frees only that. */
static void pipeline_failure_with(uint32_t threads, const char *entry, unsigned long nth, int code,
                                  tf_status expected) {
    struct fixture f;
    const size_t n = MiB + 3;
    unsigned char *out = malloc(n), *seen = malloc(n);
    const long reclaimed = tfd()->tfd_reclaimed(TFD_EVENTS);
    const long reclaimed_hosts = tfd()->tfd_reclaimed(TFD_HOST_ALLOCS);
    long depth;
    setup_fixture_with(&f, n, threads);
    fill_pattern(out, n, 3);
    assert_ok(tf_upload(f.rt, out, f.d, n));
    memset(out, 0x5A, n);
    INJECT(entry, nth, code, 1);
    assert_failure(tf_download(f.rt, f.d, out, n), expected, "tf_download", entry, "failed");
    assert_int_equal(tf_last_error_code(), code);
    assert_null(raw_current_context());
    /* No copy thread writes dst after the call returned. */
    memcpy(seen, out, n);
    usleep(20000);
    assert_memory_equal(seen, out, n);
    depth = live(TFD_HOST_ALLOCS) - f.hosts; /* the abandoned ring */
    assert_true(depth >= 2);
    tfd()->tfd_log_clear();
    memset(out, 0, n);
    assert_ok(tf_download(f.rt, f.d, out, n));
    assert_pattern(out, n, 3);
    assert_int_equal(logged("cuMemHostAlloc"), depth); /* a fresh ring */
    assert_int_equal(live(TFD_HOST_ALLOCS) - f.hosts, 2 * depth);
    lib_free(f.rt, f.d);
    assert_ok(tf_runtime_release(f.rt));
    /* The abandoned ring was never freed: its buffers and events died with
     * the context. */
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
    assert_int_equal(tfd()->tfd_reclaimed(TFD_HOST_ALLOCS) - reclaimed_hosts, depth);
    assert_int_equal(tfd()->tfd_reclaimed(TFD_EVENTS) - reclaimed, depth);
    free(seen);
    free(out);
}

static void pipeline_failure(const char *entry, unsigned long nth, int code, tf_status expected) {
    pipeline_failure_with(2, entry, nth, code, expected);
}

static void pipeline_copy_submission_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    pipeline_failure("cuMemcpyDtoHAsync", 1, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

static void pipeline_later_copy_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    pipeline_failure("cuMemcpyDtoHAsync", 4, CUDA_ERROR_INVALID_VALUE, TF_ERROR_CUDA);
}

static void pipeline_event_record_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    pipeline_failure("cuEventRecord", 2, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

static void pipeline_wait_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    pipeline_failure("cuEventSynchronize", 3, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

/* The third device copy is queued while copy threads empty a landed step
 * (or just after): the threads finish that step before the call returns. */
static void pipeline_failure_while_threads_copy(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    pipeline_failure_with(4, "cuMemcpyDtoHAsync", 3, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
    pipeline_failure_with(4, "cuEventRecord", 3, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

/* One thread: the caller copies every step itself, no pool. */
static void pipeline_failure_with_one_thread(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    pipeline_failure_with(1, "cuMemcpyDtoHAsync", 3, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
    pipeline_failure_with(1, "cuEventSynchronize", 2, CUDA_ERROR_UNKNOWN, TF_ERROR_CUDA);
}

static void direct_download_failures(void **state) {
    const size_t n = 8192;
    struct fixture f;
    void *pin;
    (void)state;
    REQUIRE_DOUBLE();
    setup_fixture(&f, n);
    pin = pinned_alloc(f.rt, n);
    INJECT("cuMemcpyDtoHAsync", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_download(f.rt, f.d, pin, n), TF_ERROR_CUDA, "tf_download",
                   "cuMemcpyDtoHAsync failed");
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_download(f.rt, f.d, pin, n), TF_ERROR_CUDA, "tf_download",
                   "cuStreamSynchronize failed");
    assert_null(raw_current_context());
    assert_ok(tf_runtime_sync(f.rt)); /* the way back to reusing dst */
    assert_ok(tf_download(f.rt, f.d, pin, n));
    pinned_free(f.rt, pin);
    lib_free(f.rt, f.d);
    assert_ok(tf_runtime_release(f.rt));
}

/* ---- teardown ------------------------------------------------------------- */

static void teardown_frees_every_slots_staging(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt, *bound = NULL;
    uint64_t d;
    unsigned char *buf = malloc(MiB);
    long hosts, events, depth;
    const char *warnings;
    int slot;
    hosts = live(TFD_HOST_ALLOCS);
    events = live(TFD_EVENTS);
    rt = runtime_with(2, 2, 64 << 10);
    d = lib_alloc(rt, MiB);
    assert_ok(tf_runtime_sync(rt));
    tfd()->tfd_log_clear();
    for (slot = 0; slot < 2; ++slot) {
        assert_ok(tf_runtime_bind_slot(rt, slot, &bound));
        assert_ok(tf_download_scalar(bound, d, buf, 8));
        assert_ok(tf_download(bound, d, buf, MiB));
        assert_ok(tf_runtime_release(bound));
    }
    depth = (logged("cuMemHostAlloc") - 2) / 2; /* two scalar buffers, two rings */
    assert_true(depth >= 2);
    assert_int_equal(live(TFD_HOST_ALLOCS) - hosts, 2 + 2 * depth);
    assert_int_equal(live(TFD_EVENTS) - events, 2 * depth);
    lib_free(rt, d);
    tfd()->tfd_log_clear();
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_string_equal(warnings, "");
    assert_int_equal(logged("cuMemFreeHost"), 2 + 2 * depth);
    assert_int_equal(logged("cuEventDestroy"), 2 * depth);
    assert_int_equal(live(TFD_HOST_ALLOCS), hosts);
    assert_int_equal(live(TFD_EVENTS), events);
    assert_int_equal(tfd()->tfd_reclaimed(TFD_EVENTS), 0);
    free(buf);
}

static void teardown_release_failures_are_logged(void **state) {
    tf_runtime *rt;
    uint64_t d;
    unsigned char buf[16];
    const char *warnings;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    d = lib_alloc(rt, 16);
    assert_ok(tf_download_scalar(rt, d, buf, 8));
    lib_free(rt, d);
    INJECT("cuMemFreeHost", 1, CUDA_ERROR_INVALID_VALUE, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings,
                           "tf_runtime_release: cuMemFreeHost of transfer staging failed: "
                           "CUDA_ERROR_INVALID_VALUE (1)"));
}

/* ---- the copy threads ----------------------------------------------------- */

/* Started at the first staged download, download_threads - 1 of them,
 * joined at teardown. */
static void copy_threads_start_lazily_and_are_joined(void **state) {
    const int before = count_copy_threads(); /* 0 unless an earlier test leaked a runtime */
    tf_runtime *rt = runtime_with(1, 5, 64 << 10), *one = runtime_with(1, 1, 64 << 10);
    uint64_t d = lib_alloc(rt, MiB), d1 = lib_alloc(one, MiB);
    unsigned char *buf = malloc(MiB);
    (void)state;
    assert_ok(tf_download(rt, d, buf, 4096)); /* not staged */
    assert_int_equal(count_copy_threads(), before);
    assert_ok(tf_download(rt, d, buf, MiB));
    assert_int_equal(count_copy_threads(), before + 4);
    assert_ok(tf_download(one, d1, buf, MiB)); /* one thread: the caller */
    assert_int_equal(count_copy_threads(), before + 4);
    lib_free(rt, d);
    lib_free(one, d1);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(copy_threads_settle(before), before);
    assert_ok(tf_runtime_release(one));
    free(buf);
}

/* Whether every copy thread of this process sleeps (state S in
 * /proc/self/task/<tid>/stat), asked until `ms` milliseconds have passed. */
static int copy_threads_all_sleep_within(int ms) {
    int waited;
    for (waited = 0; waited <= ms; waited += 10) {
        DIR *dir = opendir("/proc/self/task");
        struct dirent *e;
        int busy = 0;
        assert_non_null(dir);
        while ((e = readdir(dir)) != NULL) {
            char path[300], line[512] = "", *close_paren;
            FILE *f;
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
            if (!(f = fopen(path, "r"))) continue;
            if (fgets(line, sizeof line, f) && strstr(line, "(tf-download)") &&
                (close_paren = strrchr(line, ')')) != NULL && close_paren[2] != 'S')
                ++busy;
            fclose(f);
        }
        closedir(dir);
        if (!busy) return 1;
        usleep(10000);
    }
    return 0;
}

/* Idle copy threads go to sleep soon after a download instead of polling
 * for ever, and the next download wakes them and is right. */
static void idle_copy_threads_sleep_and_wake(void **state) {
    const size_t n = 3 * MiB + 11;
    tf_runtime *rt = runtime_with(1, 5, 256 << 10);
    unsigned char *src = malloc(n), *dst = malloc(n);
    uint64_t d = lib_alloc(rt, n);
    int round;
    (void)state;
    fill_pattern(src, n, 21);
    assert_ok(tf_upload(rt, src, d, n));
    for (round = 0; round < 3; ++round) {
        memset(dst, 0, n);
        assert_ok(tf_download(rt, d, dst, n));
        assert_pattern(dst, n, 21);
        assert_true(copy_threads_all_sleep_within(2000));
    }
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(dst);
    free(src);
}

/* Every pthread_join of the process, the library's included: this
 * program's definition comes first in the lookup order, before libc's (or
 * a sanitizer's), to which it forwards. */
static atomic_int joins;

int pthread_join(pthread_t thread, void **retval) {
    static int (*real)(pthread_t, void **);
    if (!real) {
        void *sym = dlsym(RTLD_NEXT, "pthread_join");
        if (!sym) abort();
        memcpy(&real, &sym, sizeof real);
    }
    atomic_fetch_add(&joins, 1);
    return real(thread, retval);
}

/* A forked child releasing a runtime whose copy threads stayed in the
 * parent must not wait for them: it does not join them at all (a join that
 * returns at once is luck: a thread that held the pool's lock at the fork
 * would hang it).  The parent's release joins both, which proves the count
 * sees the library's joins. */
static void forked_child_releases_without_the_threads(void **state) {
    const int before = count_copy_threads();
    tf_runtime *rt = runtime_with(1, 3, 64 << 10);
    uint64_t d = lib_alloc(rt, MiB);
    unsigned char *buf = malloc(MiB);
    pid_t pid;
    int status = 0, verdict[2], joined;
    char answer = 0;
    (void)state;
    assert_ok(tf_download(rt, d, buf, MiB));
    assert_int_equal(count_copy_threads(), before + 2);
    assert_int_equal(pipe(verdict), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* The answer goes through the pipe: the exit status is valgrind's
         * to use, which counts what the child inherited as leaked. */
        char ok;
        int joined;
        alarm(20); /* a hang fails the test instead of blocking it */
        joined = atomic_load(&joins);
        ok = tf_download(rt, d, buf, MiB) == TF_ERROR_RUNTIME_STATE &&
                     tf_runtime_release(rt) == TF_OK && atomic_load(&joins) == joined
                 ? 'y'
                 : 'n';
        if (write(verdict[1], &ok, 1) != 1) _exit(2);
        _exit(0);
    }
    close(verdict[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status)); /* not killed by the alarm */
    assert_int_equal(read(verdict[0], &answer, 1), 1);
    close(verdict[0]);
    assert_int_equal(answer, 'y');
    lib_free(rt, d);
    joined = atomic_load(&joins);
    assert_ok(tf_runtime_release(rt));
    /* The parent's release joins both copy threads: the count sees the
     * library's joins.  A real driver may join threads of its own while the
     * primary context goes (seen on an H200: one more). */
    if (tfd())
        assert_int_equal(atomic_load(&joins) - joined, 2);
    else
        assert_true(atomic_load(&joins) - joined >= 2);
    free(buf);
}

/* ---- options -------------------------------------------------------------- */

static tf_status new_with(uint32_t threads, uint32_t chunk) {
    tf_runtime *rt = NULL;
    tf_runtime_options o;
    tf_status st;
    tf_runtime_options_init(&o, sizeof o);
    o.download_threads = threads;
    o.download_chunk_bytes = chunk;
    st = tf_runtime_new_with_options(0, &o, &rt);
    tf_runtime_release(rt);
    return st;
}

static void download_options_are_validated(void **state) {
    tf_runtime_options o;
    tf_runtime *rt = NULL;
    (void)state;
    tf_runtime_options_init(&o, sizeof o);
    assert_int_equal(o.download_threads, 0);
    assert_int_equal(o.download_chunk_bytes, 0);
    assert_ok(new_with(1, TF_MIN_DOWNLOAD_CHUNK_BYTES));
    assert_ok(new_with(TF_MAX_DOWNLOAD_THREADS, TF_MAX_DOWNLOAD_CHUNK_BYTES));
    assert_failure(new_with(TF_MAX_DOWNLOAD_THREADS + 1, 0), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "download_threads 65 is outside 1..64");
    assert_failure(new_with(0, TF_MIN_DOWNLOAD_CHUNK_BYTES - 4096), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "download_chunk_bytes 61440");
    assert_failure(new_with(0, TF_MAX_DOWNLOAD_CHUNK_BYTES + 4096), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "download_chunk_bytes");
    assert_failure(new_with(0, (1 << 20) + 1), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "not a multiple of 4096");
    /* Whole pages: a multiple of 1024 or 2048 is not enough. */
    assert_failure(new_with(0, (1 << 20) + 1024), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "download_chunk_bytes 1049600",
                   "not a multiple of 4096");
    assert_failure(new_with(0, (1 << 20) + 2048), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "not a multiple of 4096");
    assert_ok(new_with(0, (1 << 20) + 4096));
    /* A caller built before these fields existed: defaults. */
    o.struct_size = (uint32_t)offsetof(tf_runtime_options, download_threads);
    o.download_threads = 999; /* beyond its struct: never read */
    assert_ok(tf_runtime_new_with_options(0, &o, &rt));
    assert_ok(tf_runtime_release(rt));
}

/* ---- thread cancellation -------------------------------------------------
 * A thread cancelled while it downloads into pageable memory: the download
 * runs to its end (cancellation is deferred until it returns), so no copy
 * job of its frame is left with the copy threads, and the runtime serves
 * other threads and its release afterwards.  The thread and the copy threads
 * it starts share one CPU, so that the caller regularly sleeps waiting for a
 * copy thread's piece (a cancellation point, were it not deferred). */
enum { CANCEL_ROUNDS = 6, CANCEL_BYTES = 48 << 20 };

struct cancelled_download {
    tf_runtime *rt;
    uint64_t src;
    unsigned char *dst;
    atomic_int go;
    tf_status status;
    int returned;
};

static void *download_cancelled(void *arg) {
    struct cancelled_download *c = arg;
    while (!atomic_load(&c->go)) {
    } /* no cancellation point: the request stays pending */
    c->status = tf_download(c->rt, c->src, c->dst, CANCEL_BYTES);
    c->returned = 1;
    pthread_testcancel();
    return NULL;
}

/* Returns 1 if the thread was cancelled inside tf_download (after going
 * on with the runtime, as a program would). */
static int cancelled_round(uint32_t seed) {
    tf_runtime *rt = runtime_with(TF_DEFAULT_STREAM_SLOTS, 16, 4 << 20);
    struct cancelled_download c;
    unsigned char *again = malloc(CANCEL_BYTES);
    pthread_attr_t attr;
    cpu_set_t one;
    pthread_t th;
    void *ret = NULL;
    int i;
    memset(&c, 0, sizeof c);
    c.rt = rt;
    c.src = lib_alloc(rt, CANCEL_BYTES);
    c.dst = malloc(CANCEL_BYTES);
    assert_non_null(c.dst);
    assert_non_null(again);
    fill_pattern(again, CANCEL_BYTES, seed);
    assert_ok(tf_upload(rt, again, c.src, CANCEL_BYTES));
    /* The download runs on another thread's slot: the upload must be done. */
    assert_ok(tf_runtime_sync(rt));
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    pthread_attr_init(&attr);
    pthread_attr_setaffinity_np(&attr, sizeof one, &one);
    assert_int_equal(pthread_create(&th, &attr, download_cancelled, &c), 0);
    pthread_attr_destroy(&attr);
    assert_int_equal(pthread_cancel(th), 0);
    atomic_store(&c.go, 1);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_ptr_equal(ret, PTHREAD_CANCELED);
    if (c.returned) {
        assert_ok(c.status);
        assert_pattern(c.dst, CANCEL_BYTES, seed);
    } else {
        print_error("round %u: the thread was cancelled inside tf_download\n", seed);
    }
    /* The runtime and its copy threads serve another thread afterwards. */
    for (i = 0; i < 3; ++i) {
        memset(again, 0, CANCEL_BYTES);
        assert_ok(tf_download(rt, c.src, again, CANCEL_BYTES));
        assert_pattern(again, CANCEL_BYTES, seed);
    }
    lib_free(rt, c.src);
    assert_ok(tf_runtime_release(rt));
    free(c.dst);
    free(again);
    return !c.returned;
}

static void cancelled_download_runs_to_its_end(void **state) {
    uint32_t round;
    int inside = 0;
    (void)state;
    for (round = 1; round <= CANCEL_ROUNDS; ++round) inside += cancelled_round(round);
    assert_int_equal(inside, 0);
}

/* ---- cancellation from the call's first line --------------------------------
 * A cancellation request pending when tf_download starts acts after it
 * returns, also when the call reaches a cancellation point of its own before
 * or after the staged part: here a log line (a log callback that writes to a
 * file is one).  Before: a failed context activation whose rollback fails
 * too logs a warning, and the call returns its failure.  After: the caller's
 * context cannot be put back, which logs from the frame's destructor; a
 * cancellation acted on there would end the process (std::terminate), hence
 * a child. */

struct download_args {
    tf_runtime *rt;
    uint64_t src;
    void *dst;
    size_t len;
};

static tf_status do_download(void *p) {
    struct download_args *a = p;
    return tf_download(a->rt, a->src, a->dst, a->len);
}

static void cancelled_download_logging_before_its_copy_returns(void **state) {
    struct download_args a;
    tf_status st = TF_OK;
    (void)state;
    REQUIRE_DOUBLE();
    a.rt = runtime_with(1, 4, 1 << 20);
    a.len = 4 * MiB;
    a.src = lib_alloc(a.rt, a.len);
    a.dst = malloc(a.len);
    assert_non_null(a.dst);
    INJECT("cuCtxSetCurrent", 1, CUDA_ERROR_UNKNOWN, 2); /* the activation and its rollback */
    assert_int_equal(call_with_cancel_pending(do_download, &a, &st), 1);
    assert_int_equal(st, TF_ERROR_CUDA);
    tfd()->tfd_clear_faults();
    lib_free(a.rt, a.src);
    assert_ok(tf_runtime_release(a.rt));
    free(a.dst);
}

static int child_cancelled_download_logging_after_its_copy(void) {
    struct download_args a;
    tf_status st = TF_ERROR_INTERNAL;
    a.rt = runtime_with(1, 4, 1 << 20);
    a.len = 4 * MiB;
    a.src = lib_alloc(a.rt, a.len);
    a.dst = malloc(a.len);
    SCENARIO_CHECK(a.dst != NULL);
    INJECT("cuCtxSetCurrent", 2, CUDA_ERROR_UNKNOWN, 1); /* the restore */
    SCENARIO_CHECK(call_with_cancel_pending(do_download, &a, &st) == 1);
    SCENARIO_CHECK(st == TF_OK);
    tfd()->tfd_clear_faults();
    lib_free(a.rt, a.src);
    SCENARIO_CHECK(tf_runtime_release(a.rt) == TF_OK);
    free(a.dst);
    return 0;
}

static void cancelled_download_logging_after_its_copy_returns(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(run_child("cancelled_download_logging_after_its_copy", NULL), 0);
}

static const struct child_scenario scenarios[] = {
    {"cancelled_download_logging_after_its_copy", child_cancelled_download_logging_after_its_copy},
    {NULL, NULL},
};

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(round_trips_with_defaults),
        TF_TEST(round_trips_with_small_chunks),
        TF_TEST(round_trips_with_one_thread),
        TF_TEST(zero_length_touches_nothing),
        TF_TEST(downloads_see_work_queued_before_them),
        TF_TEST(eight_threads_on_eight_slots),
        TF_TEST(eight_threads_sharing_two_slots),
        TF_TEST(twenty_four_threads_on_twenty_four_slots),
        TF_TEST(scalar_is_a_query_a_copy_and_a_flag),
        TF_TEST(scalar_staging_is_per_slot_and_made_once),
        TF_TEST(staging_is_not_write_combined),
        TF_TEST(page_locked_destination_is_written_directly),
        TF_TEST(small_pageable_download_uses_the_driver),
        TF_TEST(large_pageable_download_is_pipelined),
        TF_TEST(downloads_are_cut_into_steps),
        TF_TEST(scalar_rejects_bad_input),
        TF_TEST(download_rejects_bad_input),
        TF_TEST(memory_of_another_device_is_refused),
        TF_TEST(scalar_staging_allocation_failure),
        TF_TEST(scalar_copy_failure),
        TF_TEST(scalar_wait_failure),
        TF_TEST(address_range_query_failure),
        TF_TEST(own_allocations_need_no_address_query),
        TF_TEST(teardown_forgets_the_runtimes_allocations),
        TF_TEST(pointer_attribute_failure),
        TF_TEST(device_query_only_with_several_devices),
        TF_TEST(scalar_wait_reports_a_device_fault),
        TF_TEST(staging_ring_allocation_failures),
        TF_TEST(pipeline_copy_submission_failure),
        TF_TEST(pipeline_later_copy_failure),
        TF_TEST(pipeline_event_record_failure),
        TF_TEST(pipeline_wait_failure),
        TF_TEST(pipeline_failure_while_threads_copy),
        TF_TEST(pipeline_failure_with_one_thread),
        TF_TEST(direct_download_failures),
        TF_TEST(teardown_frees_every_slots_staging),
        TF_TEST(teardown_release_failures_are_logged),
        TF_TEST(copy_threads_start_lazily_and_are_joined),
        TF_TEST(idle_copy_threads_sleep_and_wake),
        TF_TEST(forked_child_releases_without_the_threads),
        TF_TEST(download_options_are_validated),
        TF_TEST(cancelled_download_runs_to_its_end),
        TF_TEST(cancelled_download_logging_before_its_copy_returns),
        TF_TEST(cancelled_download_logging_after_its_copy_returns),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
