/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Page-locked host memory: the per-runtime caching pool (tf_host_alloc,
 * tf_host_free, tf_host_record_use, tf_host_trim, tf_host_stats) and
 * registered caller memory (tf_host_register, tf_host_unregister).  The
 * asynchronous copies that use them: test_async_copy.c. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "support/test_support.h"
#include "support/transfer_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static tf_host_pool_stats stats_of(tf_runtime *rt) {
    tf_host_pool_stats s;
    tf_host_pool_stats_init(&s, sizeof s);
    assert_ok(tf_host_stats(rt, &s));
    return s;
}

/* Calls of `entry` since the last tfd_log_clear (the double only). */
static int calls(const char *entry) {
    size_t i, n = tfd() ? tfd()->tfd_log_count() : 0;
    int count = 0;
    for (i = 0; i < n; ++i) count += strcmp(tfd()->tfd_log_name(i), entry) == 0;
    return count;
}

static void *host_alloc(tf_runtime *rt, size_t bytes) {
    void *p = NULL;
    assert_ok(tf_host_alloc(rt, bytes, &p));
    assert_non_null(p);
    return p;
}

/* ---- the cache ------------------------------------------------------------------ */

static void freed_blocks_are_reused_by_their_class(void **state) {
    tf_runtime *rt = new_runtime();
    tf_host_pool_stats s;
    void *a, *b, *c;
    (void)state;
    a = host_alloc(rt, 1000);
    memset(a, 0x5a, 1000); /* host memory, writable */
    s = stats_of(rt);
    assert_int_equal(s.blocks_in_use, 1);
    assert_int_equal(s.bytes_in_use, 4 * KiB);
    assert_int_equal(s.driver_allocations, 1);
    assert_ok(tf_host_free(rt, a));
    s = stats_of(rt);
    assert_int_equal(s.blocks_in_use, 0);
    assert_int_equal(s.bytes_in_use, 0);
    assert_int_equal(s.blocks_cached, 1);
    assert_int_equal(s.bytes_cached, 4 * KiB);
    assert_int_equal(s.pending_frees, 0);
    /* 3000 bytes are the same 4 KiB class: the block comes back, no driver call */
    if (tfd()) tfd()->tfd_log_clear();
    b = host_alloc(rt, 3000);
    assert_ptr_equal(a, b);
    assert_int_equal(calls("cuMemHostAlloc"), 0);
    assert_int_equal(stats_of(rt).driver_allocations, 1);
    /* another class: a new block */
    c = host_alloc(rt, 5000);
    assert_true(c != b);
    s = stats_of(rt);
    assert_int_equal(s.driver_allocations, 2);
    assert_int_equal(s.bytes_in_use, 12 * KiB);
    if (tfd()) assert_int_equal(tfd()->tfd_host_alloc_flags(c), CU_MEMHOSTALLOC_PORTABLE);
    assert_ok(tf_host_free(rt, b));
    assert_ok(tf_host_free(rt, c));
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

static void sizes_round_up_to_their_class(void **state) {
    static const struct {
        size_t bytes, klass;
    } cases[] = {
        {1, 4 * KiB},
        {4 * KiB, 4 * KiB},
        {4 * KiB + 1, 8 * KiB},
        {MiB - 1, MiB},
        {MiB, MiB},
        {3 * MiB, 4 * MiB},
        {256 * MiB, 256 * MiB},
        {256 * MiB + 1, 320 * MiB},
        {400 * MiB, 448 * MiB},
    };
    tf_runtime *rt = new_runtime();
    size_t i;
    (void)state;
    for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        void *p;
        /* the real driver pins the whole class: keep a GPU host's memory */
        if (!tfd() && cases[i].klass > 16 * MiB) continue;
        p = host_alloc(rt, cases[i].bytes);
        assert_int_equal(stats_of(rt).bytes_in_use, cases[i].klass);
        assert_ok(tf_host_free(rt, p));
        assert_ok(tf_host_trim(rt));
    }
    assert_ok(tf_runtime_release(rt));
}

static void stats_follow_every_call(void **state) {
    tf_runtime *rt = new_runtime();
    tf_host_pool_stats s;
    void *p[4];
    int i;
    (void)state;
    for (i = 0; i < 4; ++i) p[i] = host_alloc(rt, (size_t)(i + 1) * 4 * KiB);
    /* classes 4, 8, 16, 16 KiB */
    s = stats_of(rt);
    assert_int_equal(s.blocks_in_use, 4);
    assert_int_equal(s.bytes_in_use, 44 * KiB);
    assert_int_equal(s.driver_allocations, 4);
    for (i = 0; i < 4; ++i) assert_ok(tf_host_free(rt, p[i]));
    s = stats_of(rt);
    assert_int_equal(s.bytes_in_use + s.bytes_cached, 44 * KiB);
    assert_int_equal(s.blocks_cached, 4);
    /* a struct that ends after bytes_in_use gets that field only */
    {
        unsigned char raw[sizeof(tf_host_pool_stats) + 8];
        tf_host_pool_stats *small = (tf_host_pool_stats *)(void *)raw;
        memset(raw, 0xee, sizeof raw);
        small->struct_size = (uint32_t)(offsetof(tf_host_pool_stats, bytes_in_use) + 8);
        assert_ok(tf_host_stats(rt, small));
        assert_int_equal(small->struct_size, offsetof(tf_host_pool_stats, bytes_in_use) + 8);
        assert_int_equal(small->bytes_in_use, 0);
        assert_int_equal(raw[offsetof(tf_host_pool_stats, bytes_cached)], 0xee);
    }
    /* a newer caller's longer struct: the library writes only what it knows */
    {
        unsigned char raw[sizeof(tf_host_pool_stats) + 16];
        tf_host_pool_stats *big = (tf_host_pool_stats *)(void *)raw;
        memset(raw, 0xee, sizeof raw);
        tf_host_pool_stats_init(big, sizeof raw);
        assert_int_equal(raw[sizeof(tf_host_pool_stats)], 0);
        raw[sizeof(tf_host_pool_stats)] = 0xee;
        assert_ok(tf_host_stats(rt, big));
        assert_int_equal(big->blocks_cached, 4);
        assert_int_equal(raw[sizeof(tf_host_pool_stats)], 0xee);
    }
    assert_ok(tf_host_trim(rt));
    s = stats_of(rt);
    assert_int_equal(s.blocks_cached, 0);
    assert_int_equal(s.bytes_cached, 0);
    assert_int_equal(s.driver_allocations, 4);
    assert_ok(tf_runtime_release(rt));
}

static void trim_frees_only_what_no_stream_uses(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 64 * KiB);
    void *idle = host_alloc(rt, 64 * KiB), *busy = host_alloc(rt, 64 * KiB);
    tf_host_pool_stats s;
    assert_ok(tf_download_async(rt, d, busy, 64 * KiB));
    assert_ok(tf_host_free(rt, idle));
    assert_ok(tf_host_free(rt, busy)); /* the copy is still queued */
    assert_int_equal(stats_of(rt).pending_frees, 1);
    tfd()->tfd_log_clear();
    assert_ok(tf_host_trim(rt));
    assert_int_equal(calls("cuMemFreeHost"), 1);
    s = stats_of(rt);
    assert_int_equal(s.blocks_cached, 1);
    assert_int_equal(s.pending_frees, 1);
    assert_ok(tf_runtime_sync(rt)); /* the copy ran; the sync polled the free */
    assert_int_equal(stats_of(rt).pending_frees, 0);
    assert_ok(tf_host_trim(rt));
    s = stats_of(rt);
    assert_int_equal(s.blocks_cached, 0);
    assert_int_equal(calls("cuMemFreeHost"), 2);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* ---- reuse waits for the streams that used a block ----------------------------- */

static void block_freed_during_a_copy_waits_for_it(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 256 * KiB);
    void *stream = NULL, *block, *other, *again;
    unsigned char *pattern = malloc(256 * KiB);
    fill_pattern(pattern, 256 * KiB, 7);
    assert_ok(tf_upload(rt, pattern, d, 256 * KiB));
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_ok(tf_runtime_sync(rt));
    block = host_alloc(rt, 256 * KiB);
    assert_ok(tf_download_async(rt, d, block, 256 * KiB));
    assert_int_equal(tfd()->tfd_pending(stream), 1); /* the copy has not run */
    assert_ok(tf_host_free(rt, block));
    assert_int_equal(stats_of(rt).pending_frees, 1);
    /* not handed out while the copy may still write it */
    other = host_alloc(rt, 256 * KiB);
    assert_true(other != block);
    assert_int_equal(stats_of(rt).driver_allocations, 2);
    assert_ok(tf_host_free(rt, other)); /* no use: cached at once */
    again = host_alloc(rt, 256 * KiB);
    assert_ptr_equal(again, other);
    /* the stream runs the copy and passes the free's event */
    assert_true(tfd()->tfd_step(stream, 2) >= 1);
    assert_int_equal(tfd()->tfd_pending(stream), 0);
    assert_pattern(block, 256 * KiB, 7); /* the copy landed in the freed block */
    other = host_alloc(rt, 256 * KiB);   /* polls the oldest pending free */
    assert_ptr_equal(other, block);
    assert_int_equal(stats_of(rt).pending_frees, 0);
    assert_int_equal(stats_of(rt).driver_allocations, 2);
    assert_ok(tf_host_free(rt, other));
    assert_ok(tf_host_free(rt, again));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(pattern);
}

static void uses_on_two_slots_wait_for_both(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL, *s1 = NULL;
    uint64_t d = 0;
    void *st0 = NULL, *st1 = NULL, *block, *p;
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_bind_slot(rt, 1, &s1));
    assert_ok(tf_runtime_stream(s0, &st0));
    assert_ok(tf_runtime_stream(s1, &st1));
    d = lib_alloc(s0, 8 * KiB);
    assert_ok(tf_runtime_sync(s0));
    block = host_alloc(rt, 8 * KiB);
    assert_ok(tf_download_async(s0, d, block, 4 * KiB));
    assert_ok(tf_download_async(s1, d + 4 * KiB, (char *)block + 4 * KiB, 4 * KiB));
    assert_ok(tf_host_free(rt, block));
    tfd()->tfd_step(st0, 10); /* slot 0 passed, slot 1 not */
    p = host_alloc(rt, 8 * KiB);
    assert_true(p != block);
    assert_ok(tf_host_free(rt, p));
    tfd()->tfd_step(st1, 10);
    p = host_alloc(rt, 8 * KiB);
    assert_ptr_equal(p, block);
    assert_ok(tf_host_free(rt, p));
    lib_free(s0, d);
    assert_ok(tf_runtime_release(s1));
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(rt));
}

/* The caller's own work on the slot stream, recorded with tf_host_record_use:
 * with unified addressing a block is also device memory at its address. */
static void recorded_caller_use_delays_reuse(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *stream = NULL, *block, *p;
    assert_ok(tf_runtime_stream(rt, &stream));
    block = host_alloc(rt, 4 * KiB);
    memset(block, 0, 4 * KiB);
    queue_memset(rt, (uint64_t)(uintptr_t)block, 0x3c, 4 * KiB);
    assert_ok(tf_host_record_use(rt, (char *)block + 100)); /* any address inside */
    assert_ok(tf_host_free(rt, block));
    p = host_alloc(rt, 4 * KiB);
    assert_true(p != block);
    assert_ok(tf_host_free(rt, p));
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(((unsigned char *)block)[4095], 0x3c);
    p = host_alloc(rt, 4 * KiB);
    assert_ptr_equal(p, block);
    assert_ok(tf_host_free(rt, p));
    /* a use past the bytes asked for is refused */
    p = host_alloc(rt, 100);
    assert_failure(tf_host_record_use(rt, (char *)p + 100), TF_ERROR_INVALID_ARGUMENT,
                   "tf_host_record_use", "is not inside a live tf_host_alloc block");
    assert_ok(tf_host_free(rt, p));
    assert_ok(tf_runtime_release(rt));
}

/* Free events come from a pool: a warm pool creates none. */
static void free_events_are_pooled(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 4 * KiB);
    void *block;
    int i;
    for (i = 0; i < 3; ++i) {
        if (i == 1) tfd()->tfd_log_clear();
        block = host_alloc(rt, 4 * KiB);
        assert_ok(tf_download_async(rt, d, block, 4 * KiB));
        assert_ok(tf_host_free(rt, block));
        assert_ok(tf_runtime_sync(rt));
    }
    assert_int_equal(calls("cuEventCreate"), 0);
    assert_int_equal(calls("cuEventRecord"), 2);
    assert_int_equal(calls("cuMemHostAlloc"), 0);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* ---- failures ---------------------------------------------------------------------- */

static void out_of_page_locked_memory_trims_and_retries(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *cached, *p = (void *)0x1;
    cached = host_alloc(rt, 64 * KiB);
    assert_ok(tf_host_free(rt, cached));
    tfd()->tfd_log_clear();
    INJECT("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    p = host_alloc(rt, MiB); /* trimmed, then the retry succeeded */
    assert_int_equal(calls("cuMemHostAlloc"), 2);
    assert_int_equal(calls("cuMemFreeHost"), 1);
    assert_int_equal(stats_of(rt).bytes_cached, 0);
    assert_int_equal(tf_last_error_status(), TF_OK);
    assert_ok(tf_host_free(rt, p));
    /* exhausted even after the trim */
    p = (void *)0x1;
    INJECT("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 2);
    assert_failure(tf_host_alloc(rt, 2 * MiB, &p), TF_ERROR_OUT_OF_MEMORY, "tf_host_alloc",
                   "cuMemHostAlloc failed", "exhausted");
    assert_ptr_equal(p, (void *)0x1);
    /* another failure: no retry */
    tfd()->tfd_log_clear();
    INJECT("cuMemHostAlloc", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_host_alloc(rt, 2 * MiB, &p), TF_ERROR_CUDA, "tf_host_alloc",
                   "cuMemHostAlloc failed");
    assert_int_equal(calls("cuMemHostAlloc"), 1);
    assert_int_equal(stats_of(rt).blocks_in_use, 0);
    assert_ok(tf_runtime_release(rt));
}

/* tf_host_alloc never waits for the device, except to trim the cache when
 * the driver is out of page-locked memory: cuMemFreeHost synchronizes (the
 * double's drains every stream, as the real one waits for the device). */
static void alloc_waits_for_the_device_only_to_trim(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 4 * KiB);
    void *stream = NULL, *cached, *p;
    int k;
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_ok(tf_runtime_sync(rt));
    cached = host_alloc(rt, 64 * KiB);
    assert_ok(tf_host_free(rt, cached));
    for (k = 0; k < 100; ++k) queue_memset(rt, d, (unsigned char)k, 4 * KiB);
    assert_int_equal(tfd()->tfd_pending(stream), 100);
    p = host_alloc(rt, 64 * KiB); /* from the cache */
    assert_ok(tf_host_free(rt, p));
    p = host_alloc(rt, MiB); /* from the driver */
    assert_ok(tf_host_free(rt, p));
    assert_int_equal(tfd()->tfd_pending(stream), 100); /* no wait */
    INJECT("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    p = host_alloc(rt, 2 * MiB);                     /* trimmed, then the retry succeeded */
    assert_int_equal(tfd()->tfd_pending(stream), 0); /* the trim waited */
    assert_ok(tf_host_free(rt, p));
    /* Out of memory with nothing cached to trim: no wait either. */
    assert_ok(tf_host_trim(rt));
    for (k = 0; k < 100; ++k) queue_memset(rt, d, (unsigned char)k, 4 * KiB);
    INJECT("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_host_alloc(rt, 2 * MiB, &p), TF_ERROR_OUT_OF_MEMORY, "tf_host_alloc",
                   "exhausted");
    assert_int_equal(tfd()->tfd_pending(stream), 100);
    assert_ok(tf_runtime_sync(rt));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* Without an event the free waits for the stream; if that fails too the
 * block is leaked, never reused. */
static void free_without_an_event_waits_or_leaks(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    static const char *const event_calls[] = {"cuEventCreate", "cuEventRecord"};
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 4 * KiB);
    void *block, *p;
    tf_host_pool_stats s;
    size_t i;
    assert_ok(tf_runtime_sync(rt));
    for (i = 0; i < 2; ++i) {
        block = host_alloc(rt, 4 * KiB);
        assert_ok(tf_download_async(rt, d, block, 4 * KiB));
        INJECT(event_calls[i], 1, CUDA_ERROR_UNKNOWN, 1);
        assert_ok(tf_host_free(rt, block)); /* waited for the stream instead */
        assert_int_equal(tf_last_error_status(), TF_OK);
        s = stats_of(rt);
        assert_int_equal(s.pending_frees, 0);
        assert_int_equal(s.blocks_cached, 1);
        p = host_alloc(rt, 4 * KiB);
        assert_ptr_equal(p, block);
        assert_ok(tf_host_free(rt, p));
    }
    block = host_alloc(rt, 4 * KiB);
    assert_ok(tf_download_async(rt, d, block, 4 * KiB));
    INJECT("cuEventRecord", 1, CUDA_ERROR_UNKNOWN, 1);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_host_free(rt, block), TF_ERROR_CUDA, "tf_host_free",
                   "cuStreamSynchronize failed");
    s = stats_of(rt);
    assert_int_equal(s.blocks_in_use + s.blocks_cached, 0);
    /* leaked: still allocated, forgotten by the pool, never handed out */
    assert_int_equal(tfd()->tfd_host_alloc_flags(block), CU_MEMHOSTALLOC_PORTABLE);
    assert_failure(tf_host_free(rt, block), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "was not allocated by tf_host_alloc");
    p = host_alloc(rt, 4 * KiB);
    assert_true(p != block);
    assert_ok(tf_host_free(rt, p));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

static void failed_queries_keep_the_block_pending(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 4 * KiB);
    void *stream = NULL, *block, *p;
    assert_ok(tf_runtime_stream(rt, &stream));
    block = host_alloc(rt, 4 * KiB);
    assert_ok(tf_download_async(rt, d, block, 4 * KiB));
    assert_ok(tf_host_free(rt, block));
    tfd()->tfd_step(stream, 10);
    INJECT("cuEventQuery", 1, CUDA_ERROR_UNKNOWN, 1);
    p = host_alloc(rt, 4 * KiB); /* the query failed: not proven passed */
    assert_true(p != block);
    assert_int_equal(tf_last_error_status(), TF_OK);
    assert_int_equal(stats_of(rt).pending_frees, 1);
    assert_ok(tf_host_free(rt, p));
    p = host_alloc(rt, 4 * KiB); /* asked again: it passed */
    assert_ptr_equal(p, block);
    assert_int_equal(stats_of(rt).pending_frees, 0);
    assert_ok(tf_host_free(rt, p));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

static void refused_driver_free_leaks_the_block(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *a, *b;
    const char *log;
    a = host_alloc(rt, 4 * KiB);
    b = host_alloc(rt, 8 * KiB);
    assert_ok(tf_host_free(rt, a));
    assert_ok(tf_host_free(rt, b));
    log_capture_start();
    INJECT("cuMemFreeHost", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_host_trim(rt), TF_ERROR_CUDA, "tf_host_trim", "cuMemFreeHost failed");
    log = log_capture_stop();
    assert_non_null(strstr(log, "leaking the page-locked block"));
    assert_int_equal(stats_of(rt).blocks_cached, 0); /* the other one was freed */
    /* classes are trimmed smallest first: a was refused and stays allocated */
    assert_int_equal(tfd()->tfd_host_alloc_flags(a), CU_MEMHOSTALLOC_PORTABLE);
    assert_int_equal(tfd()->tfd_host_alloc_flags(b), ~0u);
    assert_ok(tf_runtime_release(rt));
}

/* ---- synchronous copies that fail -------------------------------------------------
 * tf_download and tf_upload wait for their copy; when that wait fails the
 * copy may still be queued, so page-locked memory the pool tracks records
 * the use as an asynchronous copy does: a freed block is not handed out
 * again, and an unregister waits, until the slot's stream has passed it. */

/* Device memory holding `n` bytes of `value`, written and waited for. */
static uint64_t device_filled(tf_runtime *rt, size_t n, unsigned char value) {
    unsigned char *bytes = malloc(n);
    uint64_t d = lib_alloc(rt, n);
    assert_non_null(bytes);
    memset(bytes, value, n);
    assert_ok(tf_upload(rt, bytes, d, n));
    assert_ok(tf_runtime_sync(rt));
    free(bytes);
    return d;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char value) {
    size_t i;
    for (i = 0; i < n; ++i)
        if (p[i] != value) return 0;
    return 1;
}

static void failed_download_keeps_its_block_from_reuse(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    const size_t n = 4 * KiB;
    uint64_t d = device_filled(rt, n, 0x11);
    unsigned char *block, *fresh;
    block = host_alloc(rt, n);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_download(rt, d, block, n), TF_ERROR_CUDA, "tf_download",
                   "cuStreamSynchronize failed");
    assert_ok(tf_host_free(rt, block)); /* the header: safe at once */
    assert_int_equal(stats_of(rt).pending_frees, 1);
    fresh = host_alloc(rt, n);
    assert_true(fresh != block);
    memset(fresh, 0xcd, n);
    assert_ok(tf_runtime_sync(rt)); /* the stale copy lands in the pool's block */
    assert_true(all_bytes(fresh, n, 0xcd));
    assert_ptr_equal(host_alloc(rt, n), block); /* the copy is past: the block comes back */
    assert_ok(tf_host_free(rt, block));
    assert_ok(tf_host_free(rt, fresh));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

static void failed_upload_keeps_its_block_from_reuse(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    const size_t n = 4 * KiB;
    uint64_t d = device_filled(rt, n, 0);
    unsigned char *block, *fresh, back[4096];
    block = host_alloc(rt, n);
    memset(block, 0x22, n);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_upload(rt, block, d, n), TF_ERROR_CUDA, "tf_upload",
                   "cuStreamSynchronize failed");
    assert_ok(tf_host_free(rt, block));
    fresh = host_alloc(rt, n);
    assert_true(fresh != block);
    memset(fresh, 0x33, n); /* the next owner's data never reaches the device */
    assert_ok(tf_runtime_sync(rt));
    assert_ok(tf_download(rt, d, back, n));
    assert_true(all_bytes(back, n, 0x22));
    assert_ok(tf_host_free(rt, fresh));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

static void failed_download_into_a_range_delays_its_unregister(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    const size_t n = 16 * KiB;
    uint64_t d = device_filled(rt, n, 0x44);
    unsigned char *mem = NULL;
    void *stream = NULL;
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_int_equal(posix_memalign((void **)&mem, 4096, n), 0);
    memset(mem, 0, n);
    assert_ok(tf_host_register(rt, mem, n));
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_download(rt, d, mem + 4096, 4096), TF_ERROR_CUDA, "tf_download",
                   "cuStreamSynchronize failed");
    assert_true(tfd()->tfd_pending(stream) > 0);
    assert_ok(tf_host_unregister(rt, mem)); /* waited for the copy */
    assert_int_equal(tfd()->tfd_pending(stream), 0);
    assert_true(all_bytes(mem + 4096, 4096, 0x44));
    free(mem); /* nothing writes it any more */
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* tf_download_scalar never lets the device write `out`: it reads through
 * the slot's mailbox, which a failure abandons.  A block holding `out` is
 * free to be reused at once. */
static void failed_scalar_read_never_writes_its_output(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    uint64_t d = device_filled(rt, 64, 0x55);
    unsigned char *block, *again;
    block = host_alloc(rt, 64);
    memset(block, 0x66, 64);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_download_scalar(rt, d, block, 8), TF_ERROR_CUDA, "tf_download_scalar",
                   "cuStreamSynchronize failed");
    assert_ok(tf_host_free(rt, block));
    again = host_alloc(rt, 64);
    assert_ptr_equal(again, block); /* no use recorded: none to wait for */
    assert_ok(tf_runtime_sync(rt));
    assert_true(all_bytes(again, 64, 0x66));
    assert_ok(tf_host_free(rt, again));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* ---- registered memory ----------------------------------------------------------- */

static void registered_memory_lifecycle(void **state) {
    tf_runtime *rt = new_runtime();
    const size_t n = 64 * KiB;
    unsigned char *mem = NULL, *pattern = malloc(n);
    uint64_t d = lib_alloc(rt, n);
    (void)state;
    assert_int_equal(posix_memalign((void **)&mem, 4096, n), 0);
    memset(mem, 0, n);
    fill_pattern(pattern, n, 11);
    assert_ok(tf_upload(rt, pattern, d, n));
    assert_ok(tf_host_register(rt, mem, n));
    assert_int_equal(stats_of(rt).bytes_registered, n);
    assert_failure(tf_host_register(rt, mem + 4096, 4096), TF_ERROR_INVALID_ARGUMENT,
                   "tf_host_register", "overlaps the range registered");
    assert_ok(tf_download_async(rt, d, mem, n));
    /* unregister waits for the slot that used the range */
    assert_ok(tf_host_unregister(rt, mem));
    assert_pattern(mem, n, 11);
    assert_int_equal(stats_of(rt).bytes_registered, 0);
    assert_failure(tf_download_async(rt, d, mem, n), TF_ERROR_INVALID_ARGUMENT, "tf_download_async",
                   "tf_host_alloc", "tf_host_register");
    assert_failure(tf_host_unregister(rt, mem), TF_ERROR_INVALID_ARGUMENT, "tf_host_unregister",
                   "was not registered with tf_host_register");
    /* registered again after it went */
    assert_ok(tf_host_register(rt, mem, n));
    assert_failure(tf_host_unregister(rt, mem + 8), TF_ERROR_INVALID_ARGUMENT, "tf_host_unregister",
                   "not its start");
    assert_failure(tf_host_free(rt, mem), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "tf_host_unregister");
    assert_ok(tf_host_unregister(rt, mem));
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(mem);
    free(pattern);
}

static void memory_page_locked_elsewhere_is_refused(void **state) {
    tf_runtime *a = new_runtime(), *b = new_runtime();
    const size_t n = 16 * KiB;
    unsigned char *mem = NULL;
    (void)state;
    assert_int_equal(posix_memalign((void **)&mem, 4096, n), 0);
    assert_ok(tf_host_register(a, mem, n));
    assert_failure(tf_host_register(b, mem, n), TF_ERROR_INVALID_ARGUMENT, "tf_host_register",
                   "already page-locked");
    assert_failure(tf_host_unregister(b, mem), TF_ERROR_INVALID_ARGUMENT, "tf_host_unregister",
                   "was not registered");
    assert_ok(tf_host_unregister(a, mem));
    assert_ok(tf_runtime_release(b));
    assert_ok(tf_runtime_release(a));
    free(mem);
}

static void register_failures(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    const size_t n = 16 * KiB;
    unsigned char *mem = NULL;
    assert_int_equal(posix_memalign((void **)&mem, 4096, n), 0);
    INJECT("cuMemHostRegister", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_host_register(rt, mem, n), TF_ERROR_OUT_OF_MEMORY, "tf_host_register",
                   "cuMemHostRegister failed");
    assert_int_equal(stats_of(rt).bytes_registered, 0);
    assert_ok(tf_host_register(rt, mem, n)); /* nothing was left behind */
    INJECT("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_host_unregister(rt, mem), TF_ERROR_CUDA, "tf_host_unregister",
                   "cuMemHostUnregister failed");
    assert_int_equal(stats_of(rt).bytes_registered, n); /* still tracked */
    assert_ok(tf_host_unregister(rt, mem));
    assert_ok(tf_runtime_release(rt));
    free(mem);
}

/* ---- bad input ----------------------------------------------------------------- */

static void bad_arguments_are_refused(void **state) {
    tf_runtime *rt = new_runtime(), *other = new_runtime();
    void *p = (void *)0x1, *block, *foreign;
    unsigned char pageable[64];
    tf_host_pool_stats s;
    (void)state;
    assert_failure(tf_host_alloc(rt, 16, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_host_alloc",
                   "out_ptr is NULL");
    assert_failure(tf_host_alloc(rt, 0, &p), TF_ERROR_INVALID_ARGUMENT, "tf_host_alloc",
                   "bytes is 0");
    assert_failure(tf_host_alloc(rt, SIZE_MAX, &p), TF_ERROR_INVALID_ARGUMENT, "tf_host_alloc",
                   "is too large");
    assert_ptr_equal(p, (void *)0x1);
    assert_ok(tf_host_free(rt, NULL));
    block = host_alloc(rt, 100);
    foreign = host_alloc(other, 100);
    assert_failure(tf_host_free(rt, pageable), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "was not allocated by tf_host_alloc of this runtime");
    assert_failure(tf_host_free(rt, (char *)block + 1), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "not its start");
    assert_failure(tf_host_free(rt, foreign), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "was not allocated by tf_host_alloc of this runtime");
    assert_ok(tf_host_free(rt, block));
    assert_failure(tf_host_free(rt, block), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "already freed");
    assert_failure(tf_host_record_use(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_host_record_use",
                   "ptr is NULL");
    assert_failure(tf_host_record_use(rt, pageable), TF_ERROR_INVALID_ARGUMENT,
                   "tf_host_record_use", "is not inside a live tf_host_alloc block");
    assert_failure(tf_host_record_use(rt, block), TF_ERROR_INVALID_ARGUMENT, "tf_host_record_use",
                   "is not inside a live tf_host_alloc block");
    assert_failure(tf_host_register(rt, NULL, 64), TF_ERROR_INVALID_ARGUMENT, "tf_host_register",
                   "ptr is NULL");
    assert_failure(tf_host_register(rt, pageable, 0), TF_ERROR_INVALID_ARGUMENT, "tf_host_register",
                   "bytes is 0");
    assert_failure(tf_host_register(rt, (void *)(UINTPTR_MAX - 8), 64), TF_ERROR_INVALID_ARGUMENT,
                   "tf_host_register", "wraps around");
    if (tfd()) /* the double answers as CUDA documents it */
        assert_failure(tf_host_register(rt, foreign, 64), TF_ERROR_INVALID_ARGUMENT,
                       "tf_host_register", "already page-locked");
    assert_failure(tf_host_unregister(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_host_unregister",
                   "ptr is NULL");
    assert_failure(tf_host_unregister(rt, pageable), TF_ERROR_INVALID_ARGUMENT,
                   "tf_host_unregister", "was not registered with tf_host_register");
    assert_failure(tf_host_unregister(other, foreign), TF_ERROR_INVALID_ARGUMENT,
                   "tf_host_unregister", "tf_host_free");
    assert_failure(tf_host_stats(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_host_stats",
                   "out is NULL");
    tf_host_pool_stats_init(&s, sizeof s);
    s.struct_size = 8;
    assert_failure(tf_host_stats(rt, &s), TF_ERROR_INVALID_ARGUMENT, "tf_host_stats",
                   "struct_size 8 is too small");
    s.struct_size = TF_MAX_STRUCT_SIZE + 1;
    assert_failure(tf_host_stats(rt, &s), TF_ERROR_INVALID_ARGUMENT, "tf_host_stats",
                   "is over TF_MAX_STRUCT_SIZE");
    tf_host_pool_stats_init(NULL, sizeof s); /* ignored */
    assert_ok(tf_host_free(other, foreign));
    assert_ok(tf_runtime_release(other));
    assert_ok(tf_runtime_release(rt));
}

/* Every call checks its handle first: NULL, released, never a handle. */
static void handles_are_checked(void **state) {
    tf_runtime *dead = new_runtime();
    uint64_t junk[8] = {0};
    tf_runtime *bad[3];
    const tf_status want[3] = {TF_ERROR_INVALID_ARGUMENT, TF_ERROR_INVALID_HANDLE,
                               TF_ERROR_INVALID_HANDLE};
    const char *msg[3] = {"runtime handle is NULL", "was already released",
                          "is not a runtime handle"};
    unsigned char buf[16];
    void *p = NULL;
    tf_host_pool_stats s;
    int i;
    (void)state;
    assert_ok(tf_runtime_release(dead));
    bad[0] = NULL;
    bad[1] = dead;
    bad[2] = (tf_runtime *)(void *)junk;
    tf_host_pool_stats_init(&s, sizeof s);
    for (i = 0; i < 3; ++i) {
        assert_failure(tf_host_alloc(bad[i], 16, &p), want[i], "tf_host_alloc", msg[i]);
        assert_failure(tf_host_free(bad[i], buf), want[i], "tf_host_free", msg[i]);
        assert_failure(tf_host_record_use(bad[i], buf), want[i], "tf_host_record_use", msg[i]);
        assert_failure(tf_host_register(bad[i], buf, 16), want[i], "tf_host_register", msg[i]);
        assert_failure(tf_host_unregister(bad[i], buf), want[i], "tf_host_unregister", msg[i]);
        assert_failure(tf_host_stats(bad[i], &s), want[i], "tf_host_stats", msg[i]);
        assert_failure(tf_host_trim(bad[i]), want[i], "tf_host_trim", msg[i]);
        assert_failure(tf_download_async(bad[i], 0x10, buf, 16), want[i], "tf_download_async",
                       msg[i]);
        assert_failure(tf_upload_async(bad[i], buf, 0x10, 16), want[i], "tf_upload_async", msg[i]);
    }
}

/* ---- teardown and fork ----------------------------------------------------------- */

static void release_frees_the_cache_and_keeps_held_blocks(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 4 * KiB);
    const size_t n = 16 * KiB;
    unsigned char *mem = NULL;
    void *held, *cached, *pending;
    const char *log;
    assert_int_equal(posix_memalign((void **)&mem, 4096, n), 0);
    assert_ok(tf_host_register(rt, mem, n));
    held = host_alloc(rt, 4 * KiB);
    cached = host_alloc(rt, 8 * KiB);
    pending = host_alloc(rt, 16 * KiB);
    assert_ok(tf_host_free(rt, cached));
    assert_ok(tf_download_async(rt, d, pending, 4 * KiB));
    assert_ok(tf_host_free(rt, pending));
    lib_free(rt, d);
    tfd()->tfd_log_clear();
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    log = log_capture_stop();
    assert_non_null(strstr(log, "1 tf_host_alloc blocks (4096 bytes) were not freed"));
    assert_non_null(strstr(log, "tf_host_free(NULL, ptr)"));
    assert_int_equal(calls("cuMemFreeHost"), 2);
    assert_int_equal(calls("cuMemHostUnregister"), 1);
    assert_int_equal(tfd()->tfd_host_alloc_flags(cached), ~0u);
    assert_int_equal(tfd()->tfd_host_alloc_flags(pending), ~0u);
    /* the block the caller holds keeps the context, so it stays mapped */
    assert_int_equal(tfd()->tfd_host_alloc_flags(held), CU_MEMHOSTALLOC_PORTABLE);
    assert_int_equal(tfd()->tfd_primary_refcount(0), 1);
    memset(held, 1, 4 * KiB);
    assert_ok(tf_host_free(NULL, held));
    assert_int_equal(tfd()->tfd_host_alloc_flags(held), ~0u);
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);        /* released with the last block */
    assert_int_equal(tfd()->tfd_reclaimed(TFD_HOST_ALLOCS), 0); /* freed, not reclaimed */
    free(mem);
}

/* The driver's view of `p` (cuPointerGetAttribute with the context `ctx`
 * current): 1 when it is page-locked host memory the driver knows. */
static int driver_knows_host_block(void *ctx, const void *p) {
    PFN_cuPointerGetAttribute_v4000 attr = NULL;
    void *entry = raw_driver_entry("cuPointerGetAttribute", 4000);
    unsigned type = 0;
    CUresult r;
    assert_non_null(entry);
    memcpy(&attr, &entry, sizeof attr);
    raw_set_current_context(ctx);
    r = attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p);
    raw_set_current_context(NULL);
    return r == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST;
}

/* Whether device 0's primary context is active (retained by someone). */
static int primary_active(void) {
    PFN_cuDevicePrimaryCtxGetState_v7000 get_state = NULL;
    void *entry = raw_driver_entry("cuDevicePrimaryCtxGetState", 7000);
    unsigned flags = 0;
    int active = -1;
    assert_non_null(entry);
    memcpy(&get_state, &entry, sizeof get_state);
    assert_int_equal(get_state(0, &flags, &active), CUDA_SUCCESS);
    return active;
}

/* Also on a GPU (the H200 unmapped such a block with the primary context):
 * a block held at the runtime's last release stays mapped and readable,
 * tf_host_free(NULL, ptr) frees it, and the context's retain goes with it. */
static void held_block_outlives_its_runtime(void **state) {
    const size_t n = 64 * KiB;
    const int active_before = primary_active();
    tf_runtime *rt = new_runtime();
    void *ctx = NULL;
    unsigned char *block;
    size_t i;
    (void)state;
    assert_ok(tf_runtime_primary_context(rt, &ctx));
    block = host_alloc(rt, n);
    memset(block, 0x5a, n);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    assert_non_null(strstr(log_capture_stop(), "were not freed"));
    assert_true(driver_knows_host_block(ctx, block));
    for (i = 0; i < n; i += 4096) assert_int_equal(block[i], 0x5a);
    memset(block, 0xa5, n);
    assert_ok(tf_host_free(NULL, block));
    if (!active_before) assert_int_equal(primary_active(), 0);
}

/* Two runtimes on one device share its primary context: the block of the
 * first outlives both. */
static void held_block_outlives_two_runtimes(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *a = new_runtime(), *b = new_runtime();
    void *ctx = NULL;
    unsigned char *block;
    assert_ok(tf_runtime_primary_context(a, &ctx));
    block = host_alloc(a, 4 * KiB);
    log_capture_start();
    assert_ok(tf_runtime_release(a));
    assert_ok(tf_runtime_release(b));
    (void)log_capture_stop();
    assert_int_equal(tfd()->tfd_primary_refcount(0), 1);
    assert_true(driver_knows_host_block(ctx, block));
    memset(block, 3, 4 * KiB);
    assert_ok(tf_host_free(NULL, block));
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
}

/* tf_host_free(NULL, ptr) frees only such a block, once; through a live
 * runtime it is refused with a message that says how to free it. */
static void blocks_of_released_runtimes_are_freed_with_null(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime(), *other = new_runtime();
    unsigned char junk[16];
    void *block, *mine;
    block = host_alloc(rt, 4 * KiB);
    mine = host_alloc(other, 4 * KiB);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    (void)log_capture_stop();
    assert_ok(tf_host_free(NULL, NULL));
    assert_failure(tf_host_free(NULL, junk), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "runtime handle is NULL");
    assert_failure(tf_host_free(NULL, mine), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "runtime handle is NULL"); /* its runtime lives: free it there */
    assert_failure(tf_host_free(other, block), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "was not allocated by tf_host_alloc of this runtime", "tf_host_free(NULL, ptr)");
    assert_failure(tf_host_free(NULL, (char *)block + 8), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "runtime handle is NULL");
    assert_ok(tf_host_free(NULL, block));
    assert_failure(tf_host_free(NULL, block), TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                   "runtime handle is NULL");            /* a double free */
    assert_int_equal(tfd()->tfd_primary_refcount(0), 1); /* other's */
    assert_ok(tf_host_free(other, mine));
    assert_ok(tf_runtime_release(other));
}

/* A teardown that cannot prove the device idle leaks the streams; a held
 * block still keeps the context (the device may write it), and
 * tf_host_free(NULL, ptr) then only forgets it: the context's end frees it. */
static void held_block_of_a_busy_teardown_goes_with_its_context(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 4 * KiB);
    void *block;
    block = host_alloc(rt, 4 * KiB);
    assert_ok(tf_download_async(rt, d, block, 4 * KiB));
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_LAUNCH_TIMEOUT, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    (void)log_capture_stop();
    assert_int_equal(tfd()->tfd_host_alloc_flags(block), CU_MEMHOSTALLOC_PORTABLE);
    tfd()->tfd_log_clear();
    assert_ok(tf_host_free(NULL, block));
    assert_int_equal(calls("cuMemFreeHost"), 0);
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    assert_int_equal(tfd()->tfd_host_alloc_flags(block), ~0u); /* reclaimed with the context */
    assert_true(tfd()->tfd_reclaimed(TFD_HOST_ALLOCS) >= 1);
}

/* A runtime that only ever touched the pool has no stream, and still
 * returns its cache. */
static void release_without_streams_frees_the_cache(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *p;
    p = host_alloc(rt, 4 * KiB);
    assert_ok(tf_host_free(rt, p));
    tfd()->tfd_log_clear();
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(calls("cuMemFreeHost"), 1);
}

/* Runs check(arg) in a forked child (20 s at most) and asserts it said
 * yes. */
static void assert_in_forked_child(int (*check)(void *), void *arg) {
    pid_t pid;
    int status = -1, verdict[2];
    char answer = 0;
    assert_int_equal(pipe(verdict), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char ok;
        alarm(20);
        ok = check(arg) ? 'y' : 'n';
        if (write(verdict[1], &ok, 1) != 1) _exit(2);
        _exit(0);
    }
    close(verdict[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(read(verdict[0], &answer, 1), 1);
    close(verdict[0]);
    assert_int_equal(answer, 'y');
}

struct pool_in_child {
    tf_runtime *rt;
    void *block;
};

static int child_refuses_the_pool(void *arg) {
    struct pool_in_child *c = arg;
    tf_host_pool_stats s;
    void *p = NULL;
    tf_host_pool_stats_init(&s, sizeof s);
    if (tfd()) tfd()->tfd_log_clear();
    return tf_host_alloc(c->rt, 4096, &p) == TF_ERROR_RUNTIME_STATE &&
           strstr(tf_last_error_message(), "fork") != NULL &&
           tf_host_free(c->rt, c->block) == TF_ERROR_RUNTIME_STATE &&
           tf_host_trim(c->rt) == TF_ERROR_RUNTIME_STATE &&
           tf_host_stats(c->rt, &s) == TF_ERROR_RUNTIME_STATE &&
           tf_host_register(c->rt, &s, sizeof s) == TF_ERROR_RUNTIME_STATE &&
           tf_runtime_release(c->rt) == TF_OK && (!tfd() || tfd()->tfd_log_count() == 0);
}

static void forked_child_refuses_the_pool(void **state) {
    struct pool_in_child c;
    (void)state;
    c.rt = new_runtime();
    c.block = host_alloc(c.rt, 4 * KiB);
    assert_in_forked_child(child_refuses_the_pool, &c);
    assert_ok(tf_host_free(c.rt, c.block));
    assert_ok(tf_runtime_release(c.rt));
}

static int child_refuses_the_outliving_block(void *block) {
    if (tfd()) tfd()->tfd_log_clear();
    return tf_host_free(NULL, block) == TF_ERROR_RUNTIME_STATE &&
           strstr(tf_last_error_message(), "fork") != NULL &&
           (!tfd() || tfd()->tfd_log_count() == 0);
}

/* In a forked child a block that outlived its runtime is the parent's:
 * refused, no driver call. */
static void forked_child_refuses_a_block_that_outlived_its_runtime(void **state) {
    tf_runtime *rt = new_runtime();
    void *block = host_alloc(rt, 4 * KiB);
    (void)state;
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    (void)log_capture_stop();
    assert_in_forked_child(child_refuses_the_outliving_block, block);
    assert_ok(tf_host_free(NULL, block));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(freed_blocks_are_reused_by_their_class),
        TF_TEST(sizes_round_up_to_their_class),
        TF_TEST(stats_follow_every_call),
        TF_TEST(trim_frees_only_what_no_stream_uses),
        TF_TEST(block_freed_during_a_copy_waits_for_it),
        TF_TEST(uses_on_two_slots_wait_for_both),
        TF_TEST(recorded_caller_use_delays_reuse),
        TF_TEST(free_events_are_pooled),
        TF_TEST(out_of_page_locked_memory_trims_and_retries),
        TF_TEST(alloc_waits_for_the_device_only_to_trim),
        TF_TEST(free_without_an_event_waits_or_leaks),
        TF_TEST(failed_queries_keep_the_block_pending),
        TF_TEST(refused_driver_free_leaks_the_block),
        TF_TEST(failed_download_keeps_its_block_from_reuse),
        TF_TEST(failed_upload_keeps_its_block_from_reuse),
        TF_TEST(failed_download_into_a_range_delays_its_unregister),
        TF_TEST(failed_scalar_read_never_writes_its_output),
        TF_TEST(registered_memory_lifecycle),
        TF_TEST(memory_page_locked_elsewhere_is_refused),
        TF_TEST(register_failures),
        TF_TEST(bad_arguments_are_refused),
        TF_TEST(handles_are_checked),
        TF_TEST(release_frees_the_cache_and_keeps_held_blocks),
        TF_TEST(held_block_outlives_its_runtime),
        TF_TEST(held_block_outlives_two_runtimes),
        TF_TEST(blocks_of_released_runtimes_are_freed_with_null),
        TF_TEST(held_block_of_a_busy_teardown_goes_with_its_context),
        TF_TEST(release_without_streams_frees_the_cache),
        TF_TEST(forked_child_refuses_the_pool),
        TF_TEST(forked_child_refuses_a_block_that_outlived_its_runtime),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
