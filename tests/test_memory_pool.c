/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The device memory pool (docs/memory.md): one library-owned pool per
 * device, shared by the device's runtimes, never the default pool; its
 * options, out-of-memory retry, statistics, trim, recorded cross-slot use,
 * fork, teardown with live allocations and the uncached path. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "support/test_support.h"
#include "support/transfer_support.h"

#define MiB ((size_t)1 << 20)

static int logged(const char *entry) {
    size_t i, n = tfd()->tfd_log_count();
    int count = 0;
    for (i = 0; i < n; ++i) count += strcmp(tfd()->tfd_log_name(i), entry) == 0;
    return count;
}

/* The library's pool as the double sees it: the one cuMemPoolCreate pool. */
static struct tfd_mem_pool_info library_pool(void) {
    struct tfd_mem_pool_info info;
    void *pool = NULL;
    assert_int_equal(tfd()->tfd_mem_pools(&pool, 1), 1);
    assert_int_equal(tfd()->tfd_mem_pool_info(pool, &info), 0);
    return info;
}

static struct tfd_mem_pool_info default_pool(void) {
    struct tfd_mem_pool_info info;
    assert_int_equal(tfd()->tfd_mem_pool_info(tfd()->tfd_default_mem_pool(0), &info), 0);
    return info;
}

static tf_memory_pool_stats stats_of(const tf_runtime *rt) {
    tf_memory_pool_stats s;
    tf_memory_pool_stats_init(&s, sizeof s);
    assert_ok(tf_memory_stats(rt, &s));
    return s;
}

static int consistent(const tf_memory_pool_stats *s) {
    return s->in_use_bytes <= s->reserved_bytes && s->reserved_bytes <= s->reserved_peak &&
           s->in_use_bytes <= s->in_use_peak && s->frees <= s->allocations &&
           (s->allocations != s->frees || s->in_use_bytes == 0);
}

static tf_status runtime_with_memory(uint64_t threshold, uint64_t limit, tf_runtime **out) {
    tf_runtime_options o;
    tf_runtime_options_init(&o, sizeof o);
    o.memory_release_threshold = threshold;
    o.memory_reserved_limit = limit;
    return tf_runtime_new_with_options(0, &o, out);
}

static tf_runtime *bound(tf_runtime *rt, int32_t slot) {
    tf_runtime *h = NULL;
    assert_ok(tf_runtime_bind_slot(rt, slot, &h));
    return h;
}

/* A runtime of two slots and a handle bound to each, their streams made. */
struct two_slots {
    tf_runtime *rt, *s0, *s1;
};

static void open_slots(struct two_slots *t) {
    t->rt = new_runtime_with_slots(2);
    t->s0 = bound(t->rt, 0);
    t->s1 = bound(t->rt, 1);
    assert_ok(tf_runtime_sync(t->s0));
    assert_ok(tf_runtime_sync(t->s1));
}

static void close_slots(struct two_slots *t) {
    assert_ok(tf_runtime_release(t->s1));
    assert_ok(tf_runtime_release(t->s0));
    assert_ok(tf_runtime_release(t->rt));
}

/* ---- one pool per device, the library's ------------------------------------ */

/* Made once, at the first allocation, shared by every runtime of the device
 * (memory freed through another runtime), destroyed with the last one. */
static void pool_is_made_once_and_shared(void **state) {
    tf_runtime *a, *b;
    uint64_t pa, pb;
    struct tfd_mem_pool_info info;
    tf_memory_pool_stats sa, sb;
    (void)state;
    REQUIRE_DOUBLE();
    a = new_runtime();
    b = new_runtime();
    tfd()->tfd_log_clear();
    assert_int_equal(tfd()->tfd_mem_pools(NULL, 0), 0); /* not before the first allocation */
    pa = lib_alloc(a, 4096);
    pb = lib_alloc(b, 8192);
    assert_int_equal(logged("cuMemPoolCreate"), 1);
    info = library_pool();
    assert_int_equal(info.device, 0);
    assert_int_equal(info.handle_types, CU_MEM_HANDLE_TYPE_NONE);
    assert_true(info.release_threshold == UINT64_MAX);
    assert_int_equal(info.max_size, 0);
    assert_int_equal(info.allocations, 2);
    sa = stats_of(a);
    sb = stats_of(b);
    assert_memory_equal(&sa, &sb, sizeof sa); /* the device's counters */
    assert_int_equal(sa.cached, 1);
    assert_int_equal(sa.in_use_bytes, 4096 + 8192);
    assert_int_equal(sa.allocations, 2);
    assert_true(sa.release_threshold == TF_DEFAULT_MEMORY_RELEASE_THRESHOLD);
    lib_free(b, pa); /* through the other runtime */
    lib_free(a, pb);
    assert_ok(tf_runtime_release(a));
    assert_int_equal(tfd()->tfd_live(TFD_MEM_POOLS), 1); /* b still holds it */
    assert_int_equal(stats_of(b).frees, 2);
    assert_ok(tf_runtime_release(b));
    assert_int_equal(tfd()->tfd_live(TFD_MEM_POOLS), 0);
    assert_int_equal(logged("cuMemPoolDestroy"), 1);
}

/* The device's default pool belongs to every library of the process: the
 * library never allocates from it, asks for it, or sets its attributes. */
static void default_pool_is_never_touched(void **state) {
    tf_runtime *rt;
    uint64_t p;
    int i;
    struct tfd_mem_pool_info def;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    for (i = 0; i < 4; ++i) {
        p = lib_alloc(rt, MiB << i);
        assert_ok(tf_runtime_sync(rt));
        lib_free(rt, p);
        assert_ok(tf_memory_trim(rt, 0));
    }
    assert_ok(tf_memory_reset_peak(rt));
    assert_int_equal(tfd()->tfd_calls("cuMemAllocAsync"), 0);
    assert_int_equal(tfd()->tfd_calls("cuDeviceGetDefaultMemPool"), 0);
    def = default_pool();
    assert_int_equal(def.allocations, 0);
    assert_int_equal(def.attribute_sets, 0);
    assert_int_equal(def.trims, 0);
    assert_int_equal(def.release_threshold, 0);
    assert_int_equal(library_pool().allocations, 4);
    assert_ok(tf_runtime_release(rt));
}

/* Freed memory stays in the pool through synchronizations (release
 * threshold UINT64_MAX) and the next allocation of the size gets it back. */
static void freed_memory_is_kept_across_syncs(void **state) {
    tf_runtime *rt;
    uint64_t p, q;
    struct tfd_mem_pool_info info;
    tf_memory_pool_stats s;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    p = lib_alloc(rt, 64 * MiB);
    lib_free(rt, p);
    assert_ok(tf_runtime_sync(rt));
    info = library_pool();
    assert_int_equal(info.reserved, 64 * MiB);
    assert_int_equal(info.used, 0);
    q = lib_alloc(rt, 64 * MiB);
    assert_true(q == p);
    info = library_pool();
    assert_int_equal(info.blocks, 1);
    assert_int_equal(info.reserved_high, 64 * MiB);
    s = stats_of(rt);
    assert_int_equal(s.reserved_bytes, 64 * MiB);
    assert_int_equal(s.in_use_bytes, 64 * MiB);
    assert_true(consistent(&s));
    lib_free(rt, q);
    assert_ok(tf_runtime_release(rt));
}

/* The registry keeps a freed range's entry for the next allocation at its
 * base and drops such entries once they outnumber the live ones: a freed
 * address is never trusted, a reused one is known again without a driver
 * query, through both phases. */
static void freed_ranges_are_never_trusted(void **state) {
    enum { N = 150 };
    tf_runtime *rt;
    uint64_t p[N];
    uint32_t v = 0;
    unsigned long queries;
    int i, round;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    for (round = 0; round < 2; ++round) {
        for (i = 0; i < N; ++i) p[i] = lib_alloc(rt, 4096);
        assert_ok(tf_upload(rt, &v, p[N - 1], sizeof v));
        queries = tfd()->tfd_calls("cuMemGetAddressRange");
        for (i = 0; i < N; ++i) assert_ok(tf_download_scalar(rt, p[i] + 8, &v, sizeof v));
        assert_int_equal(tfd()->tfd_calls("cuMemGetAddressRange"), queries);
        for (i = 0; i < N - 1; ++i) lib_free(rt, p[i]);
        assert_ok(tf_runtime_sync(rt));
        for (i = 0; i < N - 1; i += 7)
            assert_failure(tf_download_scalar(rt, p[i] + 8, &v, sizeof v),
                           TF_ERROR_INVALID_ARGUMENT, "tf_download_scalar", "is not device memory");
        assert_ok(tf_download_scalar(rt, p[N - 1], &v, sizeof v));
        assert_int_equal(stats_of(rt).in_use_bytes, 4096);
        lib_free(rt, p[N - 1]);
    }
    assert_ok(tf_runtime_release(rt));
}

/* ---- options ------------------------------------------------------------------ */

static void threshold_and_limit_options(void **state) {
    tf_runtime *rt = NULL;
    uint64_t p = 0, q = 0;
    struct tfd_mem_pool_info info;
    tf_memory_pool_stats s;
    (void)state;
    REQUIRE_DOUBLE();
    /* A threshold of 1 keeps nothing through a synchronization. */
    assert_ok(runtime_with_memory(1, 0, &rt));
    p = lib_alloc(rt, MiB);
    lib_free(rt, p);
    assert_int_equal(library_pool().reserved, MiB);
    assert_ok(tf_runtime_sync(rt));
    info = library_pool();
    assert_int_equal(info.release_threshold, 1);
    assert_int_equal(info.reserved, 0);
    assert_int_equal(stats_of(rt).release_threshold, 1);
    assert_ok(tf_runtime_release(rt));
    /* A limit: the pool's maxSize; past it, a retry, then out of memory. */
    assert_ok(runtime_with_memory(0, 64 * MiB, &rt));
    p = lib_alloc(rt, 48 * MiB);
    assert_int_equal(library_pool().max_size, 64 * MiB);
    q = 99;
    assert_failure(tf_alloc(rt, 32 * MiB, &q), TF_ERROR_OUT_OF_MEMORY, "tf_alloc",
                   "out of device memory for 32.00 MiB (33554432 bytes) on device 0",
                   "the library's pool holds 48.00 MiB reserved, 48.00 MiB of it in live tf_alloc",
                   "reserved limit 64.00 MiB (memory_reserved_limit)", "tried once more");
    assert_int_equal(q, 99);
    s = stats_of(rt);
    assert_int_equal(s.reserved_limit, 64 * MiB);
    assert_int_equal(s.oom_retries, 1);
    assert_int_equal(s.oom_failures, 1);
    lib_free(rt, p);
    q = lib_alloc(rt, 64 * MiB); /* the trim of a retry makes room */
    lib_free(rt, q);
    assert_ok(tf_runtime_release(rt));
}

static void bad_memory_options_are_refused(void **state) {
    tf_runtime *rt = NULL;
    (void)state;
    assert_failure(runtime_with_memory(0, 1, &rt), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "memory_reserved_limit 1 is below",
                   "TF_MIN_MEMORY_RESERVED_LIMIT (33554432");
    assert_failure(runtime_with_memory(0, TF_MIN_MEMORY_RESERVED_LIMIT - 1, &rt),
                   TF_ERROR_INVALID_ARGUMENT, "tf_runtime_new_with_options",
                   "memory_reserved_limit 33554431 is below");
    assert_null(rt);
    assert_ok(runtime_with_memory(0, TF_MIN_MEMORY_RESERVED_LIMIT, &rt));
    assert_ok(tf_runtime_release(rt));
}

/* The pool has the options of the runtime that made it while any runtime
 * of the device lives: a runtime that sets other values fails at creation,
 * naming both; 0 takes the pool's; equal values are fine. */
static void conflicting_options_fail_at_creation(void **state) {
    tf_runtime *first = NULL, *rt = NULL;
    uint64_t identity = 0;
    char creator[64];
    (void)state;
    assert_ok(runtime_with_memory(0, 128 * MiB, &first));
    assert_ok(tf_runtime_identity(first, &identity));
    snprintf(creator, sizeof creator, "which runtime %llu created", (unsigned long long)identity);
    assert_failure(
        runtime_with_memory(0, 256 * MiB, &rt), TF_ERROR_INVALID_ARGUMENT,
        "tf_runtime_new_with_options",
        "memory_reserved_limit 268435456 differs from the 134217728 of device 0's memory "
        "pool",
        creator, "leave memory_reserved_limit 0 to take the pool's");
    assert_failure(runtime_with_memory(5, 0, &rt), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options",
                   "memory_release_threshold 5 differs from the UINT64_MAX (keep all)", creator);
    assert_null(rt);
    assert_ok(runtime_with_memory(0, 0, &rt)); /* takes the pool's */
    assert_int_equal(stats_of(rt).reserved_limit, 128 * MiB);
    assert_ok(tf_runtime_release(rt));
    assert_ok(runtime_with_memory(UINT64_MAX, 128 * MiB, &rt)); /* equal: fine */
    assert_ok(tf_runtime_release(rt));
    assert_ok(tf_runtime_release(first));
    /* The device's last runtime took the pool along: new options are free. */
    assert_ok(runtime_with_memory(5, 256 * MiB, &rt));
    assert_int_equal(stats_of(rt).release_threshold, 5);
    assert_ok(tf_runtime_release(rt));
}

/* An older caller's struct (1.1, without the memory fields) gets the
 * defaults and shares the pool whatever it has. */
static void older_options_take_the_pools(void **state) {
    tf_runtime *first = NULL, *old = NULL;
    tf_runtime_options o;
    (void)state;
    assert_ok(runtime_with_memory(3, 0, &first));
    tf_runtime_options_init(&o, offsetof(tf_runtime_options, memory_release_threshold));
    assert_ok(tf_runtime_new_with_options(0, &o, &old));
    assert_int_equal(stats_of(old).release_threshold, 3);
    assert_ok(tf_runtime_release(old));
    assert_ok(tf_runtime_release(first));
}

/* maxSize came with CUDA 12.2: a limit before it is refused at creation. */
static int child_limit_on_an_old_driver(void) {
    tf_runtime *rt = NULL;
    tfd()->tfd_set_driver_version(12010);
    if (runtime_with_memory(0, 64 * MiB, &rt) != TF_ERROR_NOT_SUPPORTED) return 10;
    if (!strstr(tf_last_error_message(),
                "memory_reserved_limit needs a driver of CUDA 12.2 or "
                "later; this one is CUDA 12.1"))
        return 11;
    if (runtime_with_memory(0, 0, &rt) != TF_OK) return 12;
    return tf_runtime_release(rt) == TF_OK ? 0 : 13;
}

static void limit_needs_cuda_12_2(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(run_child("limit_on_an_old_driver", NULL), 0);
}

/* ---- out of memory --------------------------------------------------------- */

/* The pool cannot grow: frees queued on any slot are made visible (their
 * streams synchronized), cached memory goes back, the allocation is tried
 * once more. */
static void oom_returns_cached_memory_and_retries(void **state) {
    struct two_slots t;
    uint64_t a, b;
    tf_memory_pool_stats s;
    (void)state;
    REQUIRE_DOUBLE();
    open_slots(&t);
    tfd()->tfd_set_total_mem(0, 8 * MiB);
    a = lib_alloc(t.s1, 6 * MiB);
    lib_free(t.s1, a); /* queued on slot 1: not run */
    tfd()->tfd_log_clear();
    b = lib_alloc(t.s0, 5 * MiB / 2); /* needs a's memory */
    assert_int_equal(logged("cuMemAllocFromPoolAsync"), 2);
    assert_int_equal(logged("cuStreamSynchronize"), 2); /* every slot of the device */
    assert_int_equal(logged("cuMemPoolTrimTo"), 1);
    s = stats_of(t.rt);
    assert_int_equal(s.oom_retries, 1);
    assert_int_equal(s.oom_failures, 0);
    assert_int_equal(s.trims, 1);
    assert_int_equal(s.reserved_bytes, 5 * MiB / 2);
    assert_true(consistent(&s));
    lib_free(t.s0, b);
    close_slots(&t);
}

static void oom_injected_once_is_recovered(void **state) {
    tf_runtime *rt;
    uint64_t p = 0;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    lib_free(rt, lib_alloc(rt, 64)); /* the pool exists */
    INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    tfd()->tfd_log_clear();
    assert_ok(tf_alloc(rt, MiB, &p));
    assert_int_equal(logged("cuMemPoolTrimTo"), 1);
    assert_int_equal(stats_of(rt).oom_retries, 1);
    lib_free(rt, p);
    assert_ok(tf_runtime_release(rt));
}

static void oom_injected_twice_is_reported(void **state) {
    tf_runtime *rt;
    uint64_t p = 77, keep;
    long live;
    tf_memory_pool_stats s;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    keep = lib_alloc(rt, 3 * MiB);
    live = tfd()->tfd_live(TFD_DEVICE_ALLOCS);
    INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 2);
    assert_failure(tf_alloc(rt, MiB, &p), TF_ERROR_OUT_OF_MEMORY, "tf_alloc",
                   "tf_alloc: out of device memory for 1.00 MiB (1048576 bytes) on device 0: the "
                   "library's pool holds 3.00 MiB reserved, 3.00 MiB of it in live tf_alloc "
                   "allocations; reserved limit none; the device has 80.00 GiB free of 80.00 GiB "
                   "(cuMemGetInfo); cached memory was given back to the driver and the "
                   "allocation tried once more");
    /* 80 GiB less 3 MiB prints as 80.00 GiB: what matters is that it is asked. */
    assert_string_equal(tf_last_error_call(), "cuMemAllocFromPoolAsync");
    assert_int_equal(tf_last_error_code(), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(p, 77);
    assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), live); /* nothing leaked */
    s = stats_of(rt);
    assert_int_equal(s.oom_failures, 1);
    assert_int_equal(s.allocations, 1);
    assert_null(raw_current_context());
    /* cuMemGetInfo failing leaves the message without the device's side. */
    INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 2);
    INJECT("cuMemGetInfo", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_alloc(rt, MiB, &p), TF_ERROR_OUT_OF_MEMORY, "tf_alloc",
                   "free memory unknown (cuMemGetInfo: CUDA_ERROR_UNKNOWN (999))");
    lib_free(rt, keep);
    assert_ok(tf_runtime_release(rt));
}

/* What the retry does can fail too: reported, nothing allocated. */
static void oom_retry_failures_are_reported(void **state) {
    tf_runtime *rt;
    uint64_t p = 77;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    lib_free(rt, lib_alloc(rt, 64));
    /* Whether the device is integrated is asked at the first retry. */
    INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    INJECT("cuDeviceGetAttribute", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_alloc(rt, MiB, &p), TF_ERROR_CUDA, "tf_alloc", "cuDeviceGetAttribute failed");
    INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    INJECT("cuMemPoolTrimTo", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_alloc(rt, MiB, &p), TF_ERROR_CUDA, "tf_alloc", "cuMemPoolTrimTo failed");
    INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_alloc(rt, MiB, &p), TF_ERROR_CUDA, "tf_alloc", "cuStreamSynchronize failed");
    INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    INJECT("cuMemAllocFromPoolAsync", 2, CUDA_ERROR_INVALID_VALUE, 1);
    assert_failure(tf_alloc(rt, MiB, &p), TF_ERROR_CUDA, "tf_alloc",
                   "cuMemAllocFromPoolAsync failed", "CUDA_ERROR_INVALID_VALUE (1)");
    assert_int_equal(p, 77);
    assert_int_equal(stats_of(rt).allocations, 1);
    assert_ok(tf_runtime_release(rt));
}

/* Page-locked memory blocks device memory only on an integrated device:
 * there the retry trims the runtimes' page-locked caches too. */
static void oom_trims_page_locked_caches_on_integrated_devices(void **state) {
    tf_runtime *rt;
    void *block = NULL;
    uint64_t p = 0;
    tf_host_pool_stats hs;
    int integrated;
    (void)state;
    REQUIRE_DOUBLE();
    for (integrated = 0; integrated <= 1; ++integrated) {
        tfd()->tfd_set_attribute(0, CU_DEVICE_ATTRIBUTE_INTEGRATED, integrated);
        rt = new_runtime();
        assert_ok(tf_host_alloc(rt, 4096, &block));
        assert_ok(tf_host_free(rt, block));
        INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
        assert_ok(tf_alloc(rt, MiB, &p));
        tf_host_pool_stats_init(&hs, sizeof hs);
        assert_ok(tf_host_stats(rt, &hs));
        assert_int_equal(hs.blocks_cached, integrated ? 0 : 1);
        lib_free(rt, p);
        assert_ok(tf_runtime_release(rt));
    }
}

/* ---- statistics, peaks, trim ------------------------------------------------- */

struct churn {
    tf_runtime *rt;
    int readers_done;
    int bad;
    int iterations;
    pthread_mutex_t mu;
};

static void *allocate_and_free(void *arg) {
    struct churn *c = arg;
    uint64_t p[4];
    int i, k;
    for (i = 0; i < c->iterations; ++i) {
        for (k = 0; k < 4; ++k)
            if (tf_alloc(c->rt, (size_t)(256 << ((i + k) % 12)), &p[k]) != TF_OK) p[k] = 0;
        for (k = 0; k < 4; ++k)
            if (!p[k] || tf_free(c->rt, p[k]) != TF_OK) {
                pthread_mutex_lock(&c->mu);
                ++c->bad;
                pthread_mutex_unlock(&c->mu);
            }
        if (i % 64 == 0 && tf_runtime_sync(c->rt) != TF_OK) ++c->bad;
    }
    return NULL;
}

static void *read_stats(void *arg) {
    struct churn *c = arg;
    int i, bad = 0;
    for (i = 0; i < c->iterations; ++i) {
        tf_memory_pool_stats s;
        tf_memory_pool_stats_init(&s, sizeof s);
        if (tf_memory_stats(c->rt, &s) != TF_OK || !consistent(&s)) ++bad;
        if (i % 97 == 0 && tf_memory_reset_peak(c->rt) != TF_OK) ++bad;
    }
    pthread_mutex_lock(&c->mu);
    c->bad += bad;
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* 16 threads: 8 allocate and free, 8 read the counters; every snapshot
 * agrees with itself, and the quiet pool's counts add up. */
static void stats_are_consistent_from_16_threads(void **state) {
    struct churn c;
    pthread_t t[16];
    tf_memory_pool_stats s;
    int i;
    (void)state;
    memset(&c, 0, sizeof c);
    c.rt = new_runtime();
    c.iterations = test_gpu_mode() ? 2000 : 400;
    pthread_mutex_init(&c.mu, NULL);
    for (i = 0; i < 16; ++i)
        assert_int_equal(pthread_create(&t[i], NULL, i % 2 ? read_stats : allocate_and_free, &c),
                         0);
    for (i = 0; i < 16; ++i) assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(c.bad, 0);
    s = stats_of(c.rt);
    assert_true(consistent(&s));
    assert_int_equal(s.allocations, (uint64_t)8 * 4 * c.iterations);
    assert_int_equal(s.frees, s.allocations);
    assert_int_equal(s.in_use_bytes, 0);
    pthread_mutex_destroy(&c.mu);
    assert_ok(tf_runtime_release(c.rt));
}

static void peaks_reset_to_the_current_values(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t a, b;
    tf_memory_pool_stats s;
    (void)state;
    a = lib_alloc(rt, 4 * MiB);
    b = lib_alloc(rt, MiB);
    lib_free(rt, a);
    s = stats_of(rt);
    assert_int_equal(s.in_use_peak, 5 * MiB);
    assert_int_equal(s.in_use_bytes, MiB);
    assert_ok(tf_memory_reset_peak(rt));
    s = stats_of(rt);
    assert_int_equal(s.in_use_peak, MiB);
    assert_true(s.reserved_peak == s.reserved_bytes);
    assert_true(consistent(&s));
    if (tfd()) {
        INJECT("cuMemPoolSetAttribute", 1, CUDA_ERROR_UNKNOWN, 1);
        assert_failure(tf_memory_reset_peak(rt), TF_ERROR_CUDA, "tf_memory_reset_peak",
                       "cuMemPoolSetAttribute failed");
        INJECT("cuMemPoolGetAttribute", 1, CUDA_ERROR_UNKNOWN, 1);
        s.allocations = 12345;
        assert_failure(tf_memory_stats(rt, &s), TF_ERROR_CUDA, "tf_memory_stats",
                       "cuMemPoolGetAttribute failed");
        assert_int_equal(s.allocations, 12345); /* untouched */
    }
    lib_free(rt, b);
    assert_ok(tf_runtime_release(rt));
}

/* Trim waits for the frees queued on every slot of the device, then gives
 * the unused memory back down to what it may keep. */
static void trim_gives_unused_memory_back(void **state) {
    tf_runtime *rt, *other;
    uint64_t a, b, c, before;
    tf_memory_pool_stats s;
    (void)state;
    rt = new_runtime_with_slots(2);
    other = bound(rt, 1);
    assert_ok(tf_memory_trim(rt, 0)); /* no pool yet: nothing to do */
    a = lib_alloc(rt, 4 * MiB);
    b = lib_alloc(other, 2 * MiB);
    c = lib_alloc(rt, MiB);
    lib_free(rt, a);
    lib_free(other, b); /* queued on slot 1 */
    before = stats_of(rt).reserved_bytes;
    assert_ok(tf_memory_trim(rt, 64 * MiB)); /* may keep it all */
    s = stats_of(rt);
    assert_true(s.reserved_bytes == before);
    assert_int_equal(s.trims, 1);
    assert_ok(tf_memory_trim(rt, 0));
    s = stats_of(rt);
    assert_int_equal(s.in_use_bytes, MiB);
    /* A GPU may keep c's neighbours in the chunk it shares with them. */
    assert_true(s.reserved_bytes >= MiB && s.reserved_bytes <= before);
    if (tfd()) assert_int_equal(s.reserved_bytes, MiB);
    assert_int_equal(s.trims, 2);
    assert_true(consistent(&s));
    if (tfd()) {
        INJECT("cuMemPoolTrimTo", 1, CUDA_ERROR_UNKNOWN, 1);
        assert_failure(tf_memory_trim(rt, 0), TF_ERROR_CUDA, "tf_memory_trim",
                       "cuMemPoolTrimTo failed");
        INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
        assert_failure(tf_memory_trim(rt, 0), TF_ERROR_CUDA, "tf_memory_trim",
                       "cuStreamSynchronize failed");
        assert_int_equal(stats_of(rt).trims, 2);
    }
    assert_null(raw_current_context());
    lib_free(rt, c);
    assert_ok(tf_runtime_release(other));
    assert_ok(tf_runtime_release(rt));
}

/* ---- recorded use on several slots ----------------------------------------- */

/* Slot 1 queues work on x (deferred: it runs later); x is freed from slot
 * 0 and the pool hands the same memory to y on slot 0, which fills it.
 * Returns the byte y holds once both slots ran: 0xAA when the free waited
 * for slot 1, 0x55 when slot 1's late write landed in y. */
static unsigned char free_while_slot_1_uses(int record) {
    const size_t n = 4096;
    struct two_slots t;
    uint64_t x, y;
    unsigned char *back = malloc(n);
    unsigned char got;
    open_slots(&t);
    x = lib_alloc(t.s0, n);
    queue_memset(t.s1, x, 0x55, n);
    if (record) assert_ok(tf_memory_record_use(t.s1, x + 100)); /* any address inside */
    assert_ok(tf_free(t.s0, x));
    y = lib_alloc(t.s0, n);
    assert_true(y == x); /* stream order on slot 0: the pool reuses it at once */
    queue_memset(t.s0, y, 0xAA, n);
    assert_ok(tf_runtime_sync(t.s0));
    assert_ok(tf_runtime_sync(t.s1));
    assert_ok(tf_download(t.s0, y, back, n));
    got = back[n - 1];
    assert_int_equal(back[0], got);
    free(back);
    lib_free(t.s0, y);
    close_slots(&t);
    return got;
}

static void recorded_use_orders_the_free(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(free_while_slot_1_uses(1), 0xAA);
}

/* The same without the record: the double shows the hazard the record
 * prevents, so the test above can fail. */
static void unrecorded_use_shows_the_hazard(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(free_while_slot_1_uses(0), 0x55);
}

/* Events come from a pool; the freeing slot's own use needs none; a
 * failure to order leaves the allocation live and the free retryable. */
static void recorded_use_events_and_failures(void **state) {
    struct two_slots t;
    uint64_t x, y;
    long events;
    (void)state;
    REQUIRE_DOUBLE();
    open_slots(&t);
    x = lib_alloc(t.s0, 64);
    y = lib_alloc(t.s0, 64);
    assert_ok(tf_runtime_sync(t.s1));         /* slot 1's stream exists */
    assert_ok(tf_memory_record_use(t.s0, x)); /* its own slot: no event at the free */
    tfd()->tfd_log_clear();
    assert_ok(tf_free(t.s0, x));
    assert_int_equal(logged("cuEventRecord"), 0);
    x = lib_alloc(t.s0, 64);
    assert_ok(tf_memory_record_use(t.s1, x));
    assert_ok(tf_memory_record_use(t.s1, x)); /* once is enough */
    assert_ok(tf_memory_record_use(t.s1, y));
    events = tfd()->tfd_live(TFD_EVENTS);
    tfd()->tfd_log_clear();
    INJECT("cuEventRecord", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_free(t.s0, x), TF_ERROR_CUDA, "tf_free", "cuEventRecord failed");
    INJECT("cuStreamWaitEvent", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_free(t.s0, x), TF_ERROR_CUDA, "tf_free", "cuStreamWaitEvent failed");
    assert_int_equal(stats_of(t.rt).in_use_bytes, 128); /* nothing was freed */
    assert_ok(tf_free(t.s0, x));
    assert_ok(tf_free(t.s0, y));
    assert_int_equal(logged("cuEventCreate"), 1); /* pooled */
    assert_int_equal(tfd()->tfd_live(TFD_EVENTS), events + 1);
    close_slots(&t);
}

/* The pooled event is busy only during a free: its creation failing makes
 * the free fail before anything is queued. */
static void recorded_use_event_creation_failure(void **state) {
    struct two_slots t;
    uint64_t x;
    (void)state;
    REQUIRE_DOUBLE();
    open_slots(&t);
    x = lib_alloc(t.s0, 64);
    assert_ok(tf_memory_record_use(t.s1, x));
    INJECT("cuEventCreate", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_free(t.s0, x), TF_ERROR_CUDA, "tf_free", "cuEventCreate failed");
    assert_int_equal(stats_of(t.rt).in_use_bytes, 64);
    assert_ok(tf_free(t.s0, x));
    close_slots(&t);
}

/* A runtime's uses go with its teardown (its streams synchronized first):
 * a later free through another runtime records on no destroyed stream. */
static void uses_of_a_released_runtime_are_dropped(void **state) {
    tf_runtime *keep, *gone;
    uint64_t x;
    (void)state;
    keep = new_runtime();
    gone = new_runtime();
    x = lib_alloc(keep, 4096);
    assert_ok(tf_runtime_sync(keep));
    queue_memset(gone, x, 1, 4096);
    assert_ok(tf_memory_record_use(gone, x));
    assert_ok(tf_runtime_release(gone));
    if (tfd()) tfd()->tfd_log_clear();
    assert_ok(tf_free(keep, x));
    if (tfd()) assert_int_equal(logged("cuEventRecord"), 0);
    assert_ok(tf_runtime_release(keep));
}

static void record_use_checks_its_address(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t x = lib_alloc(rt, 64);
    unsigned char host[8];
    (void)state;
    assert_failure(tf_memory_record_use(rt, 0), TF_ERROR_INVALID_ARGUMENT, "tf_memory_record_use",
                   "ptr is 0");
    assert_failure(tf_memory_record_use(rt, (uint64_t)(uintptr_t)host), TF_ERROR_INVALID_ARGUMENT,
                   "tf_memory_record_use",
                   "is not inside a live tf_alloc() allocation of device 0");
    assert_failure(tf_memory_record_use(rt, x + 64), TF_ERROR_INVALID_ARGUMENT,
                   "tf_memory_record_use", "is not inside a live tf_alloc()");
    assert_ok(tf_memory_record_use(rt, x + 63));
    lib_free(rt, x);
    assert_failure(tf_memory_record_use(rt, x), TF_ERROR_INVALID_ARGUMENT, "tf_memory_record_use",
                   "is not inside a live tf_alloc()");
    assert_failure(tf_memory_record_use(NULL, x), TF_ERROR_INVALID_ARGUMENT, "tf_memory_record_use",
                   "runtime handle is NULL");
    assert_ok(tf_runtime_release(rt));
}

/* ---- bad input, fork, teardown ------------------------------------------------ */

static void bad_arguments_are_refused(void **state) {
    tf_runtime *rt = new_runtime(), *dead = new_runtime();
    tf_memory_pool_stats s;
    (void)state;
    assert_ok(tf_runtime_release(dead));
    tf_memory_pool_stats_init(&s, sizeof s);
    assert_failure(tf_memory_stats(NULL, &s), TF_ERROR_INVALID_ARGUMENT, "tf_memory_stats",
                   "runtime handle is NULL");
    assert_failure(tf_memory_stats(dead, &s), TF_ERROR_INVALID_HANDLE, "tf_memory_stats",
                   "was already released");
    assert_failure(tf_memory_stats(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_memory_stats",
                   "out is NULL");
    s.struct_size = 24;
    assert_failure(tf_memory_stats(rt, &s), TF_ERROR_INVALID_ARGUMENT, "tf_memory_stats",
                   "struct_size 24 is too small");
    s.struct_size = TF_MAX_STRUCT_SIZE + 1;
    assert_failure(tf_memory_stats(rt, &s), TF_ERROR_INVALID_ARGUMENT, "tf_memory_stats",
                   "is over TF_MAX_STRUCT_SIZE");
    s.struct_size = 32; /* an older caller's: only what fits is written */
    s.in_use_peak = 7;
    assert_ok(tf_memory_stats(rt, &s));
    assert_int_equal(s.in_use_peak, 7);
    assert_failure(tf_memory_trim(NULL, 0), TF_ERROR_INVALID_ARGUMENT, "tf_memory_trim",
                   "runtime handle is NULL");
    assert_failure(tf_memory_trim(dead, 0), TF_ERROR_INVALID_HANDLE, "tf_memory_trim",
                   "was already released");
    assert_failure(tf_memory_reset_peak(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_memory_reset_peak",
                   "runtime handle is NULL");
    assert_failure(tf_memory_reset_peak(dead), TF_ERROR_INVALID_HANDLE, "tf_memory_reset_peak",
                   "was already released");
    assert_failure(tf_memory_record_use(dead, 1), TF_ERROR_INVALID_HANDLE, "tf_memory_record_use",
                   "was already released");
    {
        uint64_t junk[8] = {0};
        tf_runtime *foreign = (tf_runtime *)(void *)junk;
        assert_failure(tf_memory_stats(foreign, &s), TF_ERROR_INVALID_HANDLE, "tf_memory_stats",
                       "is not a runtime handle");
        assert_failure(tf_memory_trim(foreign, 0), TF_ERROR_INVALID_HANDLE, "tf_memory_trim",
                       "is not a runtime handle");
        assert_failure(tf_memory_reset_peak(foreign), TF_ERROR_INVALID_HANDLE,
                       "tf_memory_reset_peak", "is not a runtime handle");
        assert_failure(tf_memory_record_use(foreign, 1), TF_ERROR_INVALID_HANDLE,
                       "tf_memory_record_use", "is not a runtime handle");
    }
    s.struct_size = 0;
    tf_memory_pool_stats_init(NULL, sizeof s); /* ignored */
    tf_memory_pool_stats_init(&s, 2);          /* too small: ignored */
    assert_int_equal(s.struct_size, 0);
    tf_memory_pool_stats_init(&s, TF_MAX_STRUCT_SIZE + 1); /* garbage: ignored */
    assert_int_equal(s.struct_size, 0);
    assert_ok(tf_runtime_release(rt));
}

/* In a forked child every call of the parent's runtime refuses, and its
 * release touches nothing (the parent's pool is the parent's). */
struct inherited {
    tf_runtime *rt;
    uint64_t x;
};

static int child_refuses(void *arg) {
    struct inherited *in = arg;
    tf_memory_pool_stats s;
    uint64_t p = 0;
    tf_memory_pool_stats_init(&s, sizeof s);
    if (tfd()) tfd()->tfd_log_clear();
    return tf_alloc(in->rt, 64, &p) == TF_ERROR_RUNTIME_STATE &&
           strstr(tf_last_error_message(), "fork") != NULL &&
           tf_free(in->rt, in->x) == TF_ERROR_RUNTIME_STATE &&
           tf_memory_stats(in->rt, &s) == TF_ERROR_RUNTIME_STATE &&
           tf_memory_trim(in->rt, 0) == TF_ERROR_RUNTIME_STATE &&
           tf_memory_reset_peak(in->rt) == TF_ERROR_RUNTIME_STATE &&
           tf_memory_record_use(in->rt, in->x) == TF_ERROR_RUNTIME_STATE &&
           tf_runtime_release(in->rt) == TF_OK && (!tfd() || tfd()->tfd_log_count() == 0);
}

static void forked_child_refuses_the_pool(void **state) {
    struct inherited in;
    (void)state;
    in.rt = new_runtime();
    in.x = lib_alloc(in.rt, 4096);
    assert_true(forked_child_passes(child_refuses, &in));
    lib_free(in.rt, in.x);
    assert_ok(tf_runtime_release(in.rt));
}

/* The last runtime destroys the pool with an allocation still live: the
 * driver keeps the pool until that allocation goes (freed, or with its
 * context), nothing is logged, and memory kept alive by another holder of
 * the primary context is freed through a later runtime. */
static void teardown_with_live_allocations(void **state) {
    tf_runtime *rt;
    uint64_t x;
    const char *log;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    (void)lib_alloc(rt, 4096);
    log_capture_start();
    assert_ok(tf_runtime_release(rt)); /* the context goes too: the double reclaims it */
    log = log_capture_stop();
    assert_string_equal(log, "");
    assert_int_equal(tfd()->tfd_live(TFD_MEM_POOLS), 0);
    assert_int_equal(tfd()->tfd_reclaimed(TFD_DEVICE_ALLOCS), 1);
    raw_retain_primary(0);
    rt = new_runtime();
    x = lib_alloc(rt, 4096);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(tfd()->tfd_live(TFD_MEM_POOLS), 1); /* destroyed, waiting for x */
    rt = new_runtime();
    lib_free(rt, x); /* the new pool does not know it: the driver does */
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(tfd()->tfd_live(TFD_MEM_POOLS), 0);
    assert_ok(tf_runtime_release(rt));
    raw_release_primary(0);
}

static void pool_creation_failures(void **state) {
    PFN_cuMemPoolDestroy_v11020 destroy = NULL;
    void *fn, *leaked = NULL;
    tf_runtime *rt;
    uint64_t p = 77;
    const char *log;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    INJECT("cuMemPoolCreate", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_alloc(rt, 64, &p), TF_ERROR_OUT_OF_MEMORY, "tf_alloc",
                   "cuMemPoolCreate failed");
    INJECT("cuMemPoolSetAttribute", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_alloc(rt, 64, &p), TF_ERROR_CUDA, "tf_alloc", "cuMemPoolSetAttribute failed");
    assert_int_equal(tfd()->tfd_live(TFD_MEM_POOLS), 0); /* undone */
    assert_int_equal(p, 77);
    p = lib_alloc(rt, 64); /* made now */
    lib_free(rt, p);
    INJECT("cuMemPoolDestroy", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    log = log_capture_stop();
    assert_non_null(strstr(log,
                           "tf_runtime_release: cuMemPoolDestroy of device 0's pool failed: "
                           "CUDA_ERROR_UNKNOWN (999)"));
    /* Leaked as logged; the test gives it back itself. */
    assert_int_equal(tfd()->tfd_mem_pools(&leaked, 1), 1);
    fn = raw_driver_entry("cuMemPoolDestroy", 11020);
    memcpy(&destroy, &fn, sizeof fn);
    assert_int_equal(destroy((CUmemoryPool)leaked), CUDA_SUCCESS);
}

/* Without memory pools (the device's attribute, or an entry point the
 * driver lacks) memory comes from cuMemAlloc, uncached: counted, limited
 * by the library, nothing to trim, uses need no record. */
static void uncached_without_pools(void **state) {
    tf_runtime *rt = NULL;
    uint64_t a, b = 77;
    tf_memory_pool_stats s;
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
    assert_ok(runtime_with_memory(0, 64 * MiB, &rt));
    tfd()->tfd_log_clear();
    a = lib_alloc(rt, 48 * MiB);
    assert_failure(tf_alloc(rt, 32 * MiB, &b), TF_ERROR_OUT_OF_MEMORY, "tf_alloc",
                   "uncached (cuMemAlloc), 48.00 MiB in live tf_alloc allocations",
                   "reserved limit 64.00 MiB (memory_reserved_limit)");
    assert_int_equal(b, 77);
    assert_ok(tf_memory_record_use(rt, a));
    assert_ok(tf_memory_trim(rt, 0));
    s = stats_of(rt);
    assert_int_equal(s.cached, 0);
    assert_int_equal(s.reserved_bytes, 48 * MiB);
    assert_int_equal(s.reserved_peak, 48 * MiB);
    assert_int_equal(s.oom_failures, 1);
    assert_int_equal(s.trims, 0);
    assert_true(consistent(&s));
    lib_free(rt, a);
    b = lib_alloc(rt, 64 * MiB); /* freed bytes count again */
    lib_free(rt, b);
    assert_int_equal(logged("cuMemPoolCreate") + logged("cuMemAllocFromPoolAsync"), 0);
    assert_ok(tf_runtime_release(rt));
}

static int child_without_entry_point(void) {
    tf_runtime *rt = NULL;
    uint64_t p = 0;
    tf_memory_pool_stats s;
    tfd()->tfd_hide(getenv("HIDE_ENTRY"));
    if (tf_runtime_new(0, &rt) != TF_OK) return 10;
    if (tf_alloc(rt, 64, &p) != TF_OK || tf_free(rt, p) != TF_OK) return 11;
    tf_memory_pool_stats_init(&s, sizeof s);
    if (tf_memory_stats(rt, &s) != TF_OK || s.cached != 0 || s.allocations != 1) return 12;
    if (tfd()->tfd_calls("cuMemAlloc") != 1) return 13;
    return tf_runtime_release(rt) == TF_OK ? 0 : 14;
}

static void missing_pool_entry_points_are_uncached(void **state) {
    static const char *const entries[] = {
        "cuMemPoolCreate",       "cuMemPoolDestroy", "cuMemPoolSetAttribute",
        "cuMemPoolGetAttribute", "cuMemPoolTrimTo",  "cuMemAllocFromPoolAsync",
        "cuMemFreeAsync",
    };
    size_t i;
    char env[64];
    (void)state;
    REQUIRE_DOUBLE();
    for (i = 0; i < sizeof entries / sizeof entries[0]; ++i) {
        const char *vars[] = {env, NULL};
        snprintf(env, sizeof env, "HIDE_ENTRY=%s", entries[i]);
        print_message("    hiding %s\n", entries[i]);
        assert_int_equal(run_child("without_entry_point", vars), 0);
    }
}

static const struct child_scenario scenarios[] = {
    {"limit_on_an_old_driver", child_limit_on_an_old_driver},
    {"without_entry_point", child_without_entry_point},
    {NULL, NULL},
};

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(pool_is_made_once_and_shared),
        TF_TEST(default_pool_is_never_touched),
        TF_TEST(freed_memory_is_kept_across_syncs),
        TF_TEST(freed_ranges_are_never_trusted),
        TF_TEST(threshold_and_limit_options),
        TF_TEST(bad_memory_options_are_refused),
        TF_TEST(conflicting_options_fail_at_creation),
        TF_TEST(older_options_take_the_pools),
        TF_TEST(limit_needs_cuda_12_2),
        TF_TEST(oom_returns_cached_memory_and_retries),
        TF_TEST(oom_injected_once_is_recovered),
        TF_TEST(oom_injected_twice_is_reported),
        TF_TEST(oom_retry_failures_are_reported),
        TF_TEST(oom_trims_page_locked_caches_on_integrated_devices),
        TF_TEST(stats_are_consistent_from_16_threads),
        TF_TEST(peaks_reset_to_the_current_values),
        TF_TEST(trim_gives_unused_memory_back),
        TF_TEST(recorded_use_orders_the_free),
        TF_TEST(unrecorded_use_shows_the_hazard),
        TF_TEST(recorded_use_events_and_failures),
        TF_TEST(recorded_use_event_creation_failure),
        TF_TEST(uses_of_a_released_runtime_are_dropped),
        TF_TEST(record_use_checks_its_address),
        TF_TEST(bad_arguments_are_refused),
        TF_TEST(forked_child_refuses_the_pool),
        TF_TEST(teardown_with_live_allocations),
        TF_TEST(pool_creation_failures),
        TF_TEST(uncached_without_pools),
        TF_TEST(missing_pool_entry_points_are_uncached),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
