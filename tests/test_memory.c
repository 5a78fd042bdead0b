/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Device memory and the copies that need no staging: tf_alloc / tf_free
 * (stream-ordered from the library's pool of the device, plain cuMemAlloc
 * without pools), tf_upload, tf_copy, tf_peer_copy_available /
 * tf_peer_copy.  The pool itself: test_memory_pool.c. */
#include <stdlib.h>
#include <string.h>

#include "support/raw_memory.h"
#include "support/test_support.h"
#include "support/transfer_support.h"

static int logged(const char *entry) {
    size_t i, n = tfd()->tfd_log_count();
    int count = 0;
    for (i = 0; i < n; ++i) count += strcmp(tfd()->tfd_log_name(i), entry) == 0;
    return count;
}

static int32_t supports(tf_runtime *rt, int32_t cap) {
    int32_t yes = -1;
    assert_ok(tf_runtime_supports(rt, cap, &yes));
    return yes;
}

/* ---- tf_alloc / tf_free ---------------------------------------------------- */

static void alloc_is_stream_ordered_where_pools_exist(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t p = 0;
    long before = tfd() ? tfd()->tfd_live(TFD_DEVICE_ALLOCS) : 0;
    (void)state;
    assert_int_equal(supports(rt, TF_CAP_STREAM_ORDERED_ALLOC), 1); /* the double and an H200 */
    if (tfd()) tfd()->tfd_log_clear();
    assert_ok(tf_alloc(rt, 1000, &p));
    assert_true(p != 0);
    assert_null(raw_current_context());
    if (tfd()) {
        assert_int_equal(logged("cuMemAllocFromPoolAsync"), 1);
        assert_int_equal(logged("cuMemAllocAsync") + logged("cuMemAlloc"), 0);
        assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS) - before, 1);
    }
    assert_ok(tf_free(rt, p));
    if (tfd()) {
        assert_int_equal(logged("cuMemFreeAsync"), 1);
        /* queued on the slot's stream: the memory goes when it runs */
        assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS) - before, 1);
        assert_ok(tf_runtime_sync(rt));
        assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), before);
    }
    assert_ok(tf_runtime_release(rt));
}

/* Memory freed before a synchronization is handed out again after it, at
 * the same address, from the library's pool: the device's default pool
 * (release threshold 0, memory mapped again after every sync) is never
 * used.  Only 1.0 calls, so the test also runs against 1.1's library. */
static void memory_is_kept_in_the_librarys_pool_across_syncs(void **state) {
    tf_runtime *rt;
    uint64_t p, q;
    struct tfd_mem_pool_info def;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    p = lib_alloc(rt, 1 << 20);
    queue_memset(rt, p, 1, 1 << 20);
    lib_free(rt, p);
    assert_ok(tf_runtime_sync(rt));
    q = lib_alloc(rt, 1 << 20);
    assert_true(q == p);
    assert_int_equal(tfd()->tfd_mem_pool_info(tfd()->tfd_default_mem_pool(0), &def), 0);
    assert_int_equal(def.allocations, 0);
    assert_int_equal(def.attribute_sets, 0);
    assert_int_equal(tfd()->tfd_mem_pools(NULL, 0), 1);
    lib_free(rt, q);
    assert_ok(tf_runtime_release(rt));
}

static void alloc_without_pools_is_plain(void **state) {
    tf_runtime *rt;
    uint64_t p = 0;
    unsigned char in[100], out[100];
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
    rt = new_runtime();
    assert_int_equal(supports(rt, TF_CAP_STREAM_ORDERED_ALLOC), 0);
    tfd()->tfd_log_clear();
    assert_ok(tf_alloc(rt, sizeof in, &p));
    fill_pattern(in, sizeof in, 4);
    assert_ok(tf_upload(rt, in, p, sizeof in));
    assert_ok(tf_download(rt, p, out, sizeof out));
    assert_memory_equal(in, out, sizeof in);
    assert_ok(tf_free(rt, p));
    assert_int_equal(logged("cuMemAlloc"), 1);
    assert_int_equal(logged("cuMemFree"), 1);
    assert_int_equal(logged("cuMemAllocFromPoolAsync") + logged("cuMemFreeAsync"), 0);
    assert_int_equal(logged("cuMemPoolCreate"), 0);
    p = 77;
    /* Out of memory is tried once more, then reported with the numbers. */
    INJECT("cuMemAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 2);
    assert_failure(tf_alloc(rt, 8, &p), TF_ERROR_OUT_OF_MEMORY, "tf_alloc",
                   "out of device memory for 8 bytes", "uncached (cuMemAlloc)");
    assert_string_equal(tf_last_error_call(), "cuMemAlloc");
    assert_int_equal(p, 77);
    assert_ok(tf_alloc(rt, 8, &p));
    INJECT("cuMemFree", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_free(rt, p), TF_ERROR_CUDA, "tf_free", "cuMemFree failed", "(999)");
    assert_failure(tf_free(rt, p + 1), TF_ERROR_INVALID_ARGUMENT, "tf_free",
                   "is not the start of an allocation (cuMemFree answered");
    assert_ok(tf_free(rt, p));
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

/* The pool answer is asked once per runtime. */
static void pool_support_is_asked_once(void **state) {
    tf_runtime *rt;
    uint64_t a = 0, b = 0;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    tfd()->tfd_log_clear();
    assert_ok(tf_alloc(rt, 8, &a));
    assert_ok(tf_alloc(rt, 8, &b));
    assert_ok(tf_free(rt, a));
    assert_ok(tf_free(rt, b));
    assert_int_equal(supports(rt, TF_CAP_STREAM_ORDERED_ALLOC), 1);
    assert_int_equal(logged("cuDeviceGetAttribute"), 1);
    assert_ok(tf_runtime_release(rt));
}

/* A failed query is reported and asked again by the next call; the
 * capability answers 0 meanwhile. */
static void pool_query_failure(void **state) {
    tf_runtime *rt;
    uint64_t p = 77;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    INJECT("cuDeviceGetAttribute", 1, CUDA_ERROR_UNKNOWN, 2);
    assert_failure(tf_alloc(rt, 8, &p), TF_ERROR_CUDA, "tf_alloc", "cuDeviceGetAttribute failed",
                   "(999)");
    assert_int_equal(p, 77);
    assert_int_equal(supports(rt, TF_CAP_STREAM_ORDERED_ALLOC), 0);
    assert_null(raw_current_context());
    assert_ok(tf_alloc(rt, 8, &p));
    assert_ok(tf_free(rt, p));
    assert_int_equal(supports(rt, TF_CAP_STREAM_ORDERED_ALLOC), 1);
    assert_ok(tf_runtime_release(rt));
}

/* The capability probe answers 0 when the query fails; that failure is
 * not the caller's, so its last error stays what it was. */
static void failed_capability_query_keeps_last_error(void **state) {
    tf_runtime *rt;
    unsigned long queries;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    queries = tfd()->tfd_calls("cuDeviceGetAttribute");
    /* the caller's last error */
    assert_int_equal(tf_runtime_retain(NULL), TF_ERROR_INVALID_ARGUMENT);
    INJECT("cuDeviceGetAttribute", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_int_equal(supports(rt, TF_CAP_STREAM_ORDERED_ALLOC), 0);
    assert_int_equal(tfd()->tfd_calls("cuDeviceGetAttribute"), queries + 1);
    assert_int_equal(tf_last_error_status(), TF_ERROR_INVALID_ARGUMENT);
    assert_string_equal(tf_last_error_operation(), "tf_runtime_retain");
    assert_ok(tf_runtime_release(rt));
}

/* A driver without the stream-ordered entry points: plain allocation.  The
 * library resolves entry points once per process, hence a child. */
static int child_without_async_entry_points(void) {
    tf_runtime *rt = NULL;
    uint64_t p = 0;
    int32_t yes = -1;
    tfd()->tfd_hide("cuMemAllocFromPoolAsync");
    if (tf_runtime_new(0, &rt) != TF_OK) return 10;
    if (tf_runtime_supports(rt, TF_CAP_STREAM_ORDERED_ALLOC, &yes) != TF_OK || yes != 0) return 11;
    tfd()->tfd_log_clear();
    if (tf_alloc(rt, 64, &p) != TF_OK || tf_free(rt, p) != TF_OK) return 12;
    if (logged("cuMemAlloc") != 1 || logged("cuMemFree") != 1) return 13;
    if (logged("cuDeviceGetAttribute") != 0) return 14;
    return tf_runtime_release(rt) == TF_OK ? 0 : 15;
}

static void missing_async_entry_points_fall_back(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(run_child("without_async_entry_points", NULL), 0);
}

static void alloc_of_zero_bytes_is_null(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t p = 99;
    (void)state;
    if (tfd()) tfd()->tfd_log_clear();
    assert_ok(tf_alloc(rt, 0, &p));
    assert_int_equal(p, 0);
    assert_ok(tf_free(rt, 0));
    if (tfd()) assert_int_equal(tfd()->tfd_log_count(), 0);
    assert_failure(tf_alloc(rt, 8, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_alloc", "out_ptr is NULL");
    assert_ok(tf_runtime_release(rt));
}

static void alloc_failures_are_reported(void **state) {
    tf_runtime *rt;
    uint64_t p = 77;
    long before;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    before = tfd()->tfd_live(TFD_DEVICE_ALLOCS);
    tfd()->tfd_set_total_mem(0, (size_t)1 << 20);
    assert_failure(tf_alloc(rt, (size_t)2 << 20, &p), TF_ERROR_OUT_OF_MEMORY, "tf_alloc",
                   "out of device memory for 2.00 MiB (2097152 bytes) on device 0",
                   "the device has 1.00 MiB free of 1.00 MiB (cuMemGetInfo)");
    assert_int_equal(tf_last_error_code(), CUDA_ERROR_OUT_OF_MEMORY);
    INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_INVALID_VALUE, 1);
    assert_failure(tf_alloc(rt, 8, &p), TF_ERROR_CUDA, "tf_alloc", "cuMemAllocFromPoolAsync failed",
                   "CUDA_ERROR_INVALID_VALUE (1)");
    assert_int_equal(tf_last_error_code(), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(p, 77);
    assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), before);
    assert_ok(tf_runtime_release(rt));
    rt = new_runtime(); /* its slot has no stream yet */
    INJECT("cuStreamCreate", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_alloc(rt, 8, &p), TF_ERROR_CUDA, "tf_alloc", "cuStreamCreate failed");
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

static void free_checks_its_address(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t p = lib_alloc(rt, 4096);
    unsigned char host[16];
    (void)state;
    assert_failure(tf_free(rt, (uint64_t)(uintptr_t)host), TF_ERROR_INVALID_ARGUMENT, "tf_free",
                   "ptr 0x", "is not device memory");
    if (tfd()) {
        /* Whether an address starts its allocation is the driver's to say. */
        assert_failure(tf_free(rt, p + 16), TF_ERROR_INVALID_ARGUMENT, "tf_free",
                       "is not the start of an allocation", "cuMemFreeAsync");
        INJECT("cuMemFreeAsync", 1, CUDA_ERROR_UNKNOWN, 1);
        assert_failure(tf_free(rt, p), TF_ERROR_CUDA, "tf_free", "cuMemFreeAsync failed");
    }
    assert_ok(tf_free(rt, p));
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

/* Freeing is ordered after the slot's earlier work: a download queued
 * before the free reads the memory, then it is released. */
static void memory_lives_until_the_free_is_reached(void **state) {
    tf_runtime *rt = new_runtime();
    const size_t n = (size_t)16 << 20;
    uint64_t p = lib_alloc(rt, n);
    unsigned char *buf = malloc(n);
    size_t i;
    (void)state;
    queue_memset(rt, p, 0x5A, n);
    assert_ok(tf_download(rt, p, buf, n));
    assert_ok(tf_free(rt, p));
    assert_ok(tf_runtime_sync(rt));
    for (i = 0; i < n; i += 4099) assert_int_equal(buf[i], 0x5A);
    free(buf);
    assert_ok(tf_runtime_release(rt));
}

/* ---- tf_upload ----------------------------------------------------------- */

/* src may be reused on return: pageable memory is staged by the driver,
 * page-locked memory is waited for. */
static void upload_waits_only_for_page_locked_sources(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    const size_t n = 1 << 20;
    tf_runtime *rt;
    uint64_t d;
    unsigned char *page = malloc(n), *pin, *back = malloc(n);
    rt = new_runtime();
    d = lib_alloc(rt, n);
    pin = pinned_alloc(rt, n);
    fill_pattern(page, n, 1);
    fill_pattern(pin, n, 2);
    tfd()->tfd_log_clear();
    assert_ok(tf_upload(rt, page, d, n));
    assert_int_equal(logged("cuMemcpyHtoDAsync"), 1);
    assert_int_equal(logged("cuStreamSynchronize"), 0);
    assert_ok(tf_download(rt, d, back, n));
    assert_pattern(back, n, 1);
    tfd()->tfd_log_clear();
    assert_ok(tf_upload(rt, pin, d, n));
    assert_int_equal(logged("cuStreamSynchronize"), 1);
    assert_ok(tf_download(rt, d, back, n));
    assert_pattern(back, n, 2);
    pinned_free(rt, pin);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(back);
    free(page);
}

/* Both kinds of source on any driver: the bytes arrive, even when the
 * source is overwritten right after the call. */
static void upload_source_may_be_reused_at_once(void **state) {
    const size_t n = 8 << 20;
    tf_runtime *rt = new_runtime();
    uint64_t a = lib_alloc(rt, n), b = lib_alloc(rt, n);
    unsigned char *page = malloc(n), *pin = pinned_alloc(rt, n), *back = malloc(n);
    (void)state;
    fill_pattern(page, n, 11);
    fill_pattern(pin, n, 12);
    assert_ok(tf_upload(rt, page, a, n));
    memset(page, 0, n);
    assert_ok(tf_upload(rt, pin, b, n));
    memset(pin, 0, n);
    assert_ok(tf_download(rt, a, back, n));
    assert_pattern(back, n, 11);
    assert_ok(tf_download(rt, b, back, n));
    assert_pattern(back, n, 12);
    pinned_free(rt, pin);
    lib_free(rt, a);
    lib_free(rt, b);
    assert_ok(tf_runtime_release(rt));
    free(back);
    free(page);
}

static void upload_rejects_bad_input(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t d = lib_alloc(rt, 64), other = lib_alloc(rt, 64);
    unsigned char src[128];
    (void)state;
    memset(src, 1, sizeof src);
    assert_failure(tf_upload(rt, NULL, d, 4), TF_ERROR_INVALID_ARGUMENT, "tf_upload",
                   "src is NULL");
    assert_failure(tf_upload(rt, src, d + 1, 64), TF_ERROR_INVALID_ARGUMENT, "tf_upload",
                   "dst range", "crosses the end of its allocation");
    assert_failure(tf_upload(rt, src, (uint64_t)(uintptr_t)src, 4), TF_ERROR_INVALID_ARGUMENT,
                   "tf_upload", "is not device memory");
    assert_failure(tf_upload(rt, (const void *)(uintptr_t)other, d, 4), TF_ERROR_INVALID_ARGUMENT,
                   "tf_upload", "src", "is device memory");
    assert_null(raw_current_context());
    lib_free(rt, other);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

static void upload_failures_are_reported(void **state) {
    tf_runtime *rt;
    uint64_t d, foreign;
    unsigned char src[64] = {0}, *pin;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    d = lib_alloc(rt, 64);
    pin = pinned_alloc(rt, 64);
    INJECT("cuMemcpyHtoDAsync", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_upload(rt, src, d, 64), TF_ERROR_CUDA, "tf_upload",
                   "cuMemcpyHtoDAsync failed", "(999)");
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_upload(rt, pin, d, 64), TF_ERROR_CUDA, "tf_upload",
                   "cuStreamSynchronize failed");
    INJECT("cuPointerGetAttribute", 1, CUDA_ERROR_UNKNOWN, 1); /* the kind of src */
    assert_failure(tf_upload(rt, src, d, 64), TF_ERROR_CUDA, "tf_upload",
                   "cuPointerGetAttribute failed");
    /* Memory the library did not allocate is asked of the driver. */
    foreign = dev_alloc(rt, 64);
    INJECT("cuMemGetAddressRange", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_upload(rt, src, foreign, 64), TF_ERROR_CUDA, "tf_upload",
                   "cuMemGetAddressRange failed");
    dev_free(rt, foreign);
    assert_null(raw_current_context());
    pinned_free(rt, pin);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* ---- tf_copy ------------------------------------------------------------- */

static void copy_within_the_device(void **state) {
    const size_t n = (3 << 20) + 5;
    tf_runtime *rt = new_runtime();
    uint64_t a = lib_alloc(rt, n + 16), b = lib_alloc(rt, n + 16);
    unsigned char *host = malloc(n);
    (void)state;
    fill_pattern(host, n, 21);
    assert_ok(tf_upload(rt, host, a + 3, n));
    assert_ok(tf_copy(rt, a + 3, b + 7, n));
    memset(host, 0, n);
    assert_ok(tf_download(rt, b + 7, host, n));
    assert_pattern(host, n, 21);
    /* Within one allocation, apart: fine; overlapping: refused. */
    assert_ok(tf_copy(rt, a, a + 8, 8));
    assert_failure(tf_copy(rt, a, a + 4, 8), TF_ERROR_INVALID_ARGUMENT, "tf_copy", "overlap");
    assert_failure(tf_copy(rt, a + 1, b, n + 16), TF_ERROR_INVALID_ARGUMENT, "tf_copy", "src range",
                   "crosses the end");
    assert_failure(tf_copy(rt, a, b + 1, n + 16), TF_ERROR_INVALID_ARGUMENT, "tf_copy", "dst range",
                   "crosses the end");
    assert_failure(tf_copy(rt, (uint64_t)(uintptr_t)host, b, 8), TF_ERROR_INVALID_ARGUMENT,
                   "tf_copy", "src 0x", "is not device memory");
    if (tfd()) {
        INJECT("cuMemcpyDtoDAsync", 1, CUDA_ERROR_UNKNOWN, 1);
        assert_failure(tf_copy(rt, a, b, 8), TF_ERROR_CUDA, "tf_copy", "cuMemcpyDtoDAsync failed");
    }
    assert_null(raw_current_context());
    lib_free(rt, a);
    lib_free(rt, b);
    assert_ok(tf_runtime_release(rt));
    free(host);
}

/* The overlap check is exact: |src - dst| = len - 1 overlaps, len does not. */
static void copy_overlap_boundary_is_exact(void **state) {
    tf_runtime *rt = new_runtime();
    uint64_t a = lib_alloc(rt, 64);
    (void)state;
    check_overlap_boundary(rt, NULL, a, 0);
    assert_failure(tf_copy(rt, a, a + 7, 8), TF_ERROR_INVALID_ARGUMENT, "tf_copy", "overlap");
    lib_free(rt, a);
    assert_ok(tf_runtime_release(rt));
}

/* ---- peers --------------------------------------------------------------- */

static void peer_copy_on_one_device(void **state) {
    const size_t n = 1 << 20;
    tf_runtime *x = new_runtime(), *y = new_runtime();
    uint64_t a = lib_alloc(x, n), b = lib_alloc(y, n);
    unsigned char *host = malloc(n);
    int32_t direct = -1;
    (void)state;
    assert_int_equal(supports(x, TF_CAP_PEER_COPY), 0); /* asked per pair */
    assert_ok(tf_peer_copy_available(x, y, &direct));
    assert_int_equal(direct, 1);
    fill_pattern(host, n, 31);
    assert_ok(tf_upload(x, host, a, n));
    assert_ok(tf_runtime_sync(y)); /* b's allocation is complete */
    assert_ok(tf_peer_copy(x, a, y, b, n));
    assert_ok(tf_runtime_sync(x));
    memset(host, 0, n);
    assert_ok(tf_download(y, b, host, n));
    assert_pattern(host, n, 31);
    assert_failure(tf_peer_copy(x, a, y, a + 8, 16), TF_ERROR_INVALID_ARGUMENT, "tf_peer_copy",
                   "overlap");
    assert_failure(tf_peer_copy(x, a, NULL, b, 16), TF_ERROR_INVALID_ARGUMENT, "tf_peer_copy",
                   "dst_rt is NULL");
    assert_failure(tf_peer_copy_available(x, y, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_peer_copy_available", "out_available is NULL");
    assert_null(raw_current_context());
    check_overlap_boundary(x, y, a, 1); /* one device: the same check as tf_copy */
    lib_free(x, a);
    lib_free(y, b);
    assert_ok(tf_runtime_release(y));
    assert_failure(tf_peer_copy(x, a, y, b, 16), TF_ERROR_INVALID_HANDLE, "tf_peer_copy",
                   "already released");
    assert_failure(tf_peer_copy_available(x, y, &direct), TF_ERROR_INVALID_HANDLE,
                   "tf_peer_copy_available", "already released");
    assert_ok(tf_runtime_release(x));
    free(host);
}

struct two_devices {
    tf_runtime *rt0, *rt1;
    uint64_t a, b; /* on device 0 and 1 */
    void *ctx0, *ctx1;
};

static void open_two_devices(struct two_devices *t, size_t n, int peer_access) {
    tfd()->tfd_set_devices(2);
    tfd()->tfd_set_peer_access(0, 1, peer_access);
    tfd()->tfd_set_peer_access(1, 0, peer_access);
    t->rt0 = new_runtime();
    assert_ok(tf_runtime_new(1, &t->rt1));
    t->a = lib_alloc(t->rt0, n);
    t->b = lib_alloc(t->rt1, n);
    assert_ok(tf_runtime_sync(t->rt1)); /* b's allocation is complete before peer copies */
    assert_ok(tf_runtime_primary_context(t->rt0, &t->ctx0));
    assert_ok(tf_runtime_primary_context(t->rt1, &t->ctx1));
}

static void close_two_devices(struct two_devices *t) {
    lib_free(t->rt0, t->a);
    lib_free(t->rt1, t->b);
    assert_ok(tf_runtime_release(t->rt1));
    assert_ok(tf_runtime_release(t->rt0));
}

static void peer_copy_between_devices(void **state) {
    const size_t n = 4096 + 7;
    struct two_devices t;
    unsigned char host[4096 + 7];
    int32_t direct = -1;
    (void)state;
    REQUIRE_DOUBLE();
    open_two_devices(&t, n, 1);
    assert_ok(tf_peer_copy_available(t.rt0, t.rt1, &direct));
    assert_int_equal(direct, 1);
    fill_pattern(host, n, 41);
    assert_ok(tf_upload(t.rt0, host, t.a, n));
    tfd()->tfd_log_clear();
    assert_ok(tf_peer_copy(t.rt0, t.a, t.rt1, t.b, n));
    assert_ok(tf_peer_copy(t.rt0, t.a, t.rt1, t.b, n));
    assert_int_equal(logged("cuCtxEnablePeerAccess"), 1); /* once */
    assert_int_equal(tfd()->tfd_peer_enabled(t.ctx0, t.ctx1), 1);
    assert_int_equal(tfd()->tfd_peer_enabled(t.ctx1, t.ctx0), 0);
    memset(host, 0, n);
    /* rt1's streams do not wait for the copy: sync the source slot first. */
    assert_ok(tf_runtime_sync(t.rt0));
    assert_ok(tf_download(t.rt1, t.b, host, n));
    assert_pattern(host, n, 41);
    /* Each side is checked against its own runtime's device. */
    assert_failure(tf_peer_copy(t.rt0, t.b, t.rt1, t.a, 8), TF_ERROR_INVALID_ARGUMENT,
                   "tf_peer_copy", "src 0x", "is memory of device 1; this runtime is on device 0");
    assert_failure(tf_peer_copy(t.rt0, t.a, t.rt1, t.a, 8), TF_ERROR_INVALID_ARGUMENT,
                   "tf_peer_copy", "dst 0x", "is memory of device 0; this runtime is on device 1");
    INJECT("cuMemcpyPeerAsync", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_peer_copy(t.rt0, t.a, t.rt1, t.b, n), TF_ERROR_CUDA, "tf_peer_copy",
                   "cuMemcpyPeerAsync failed");
    INJECT("cuDeviceCanAccessPeer", 1, CUDA_ERROR_UNKNOWN, 2);
    assert_failure(tf_peer_copy_available(t.rt0, t.rt1, &direct), TF_ERROR_CUDA,
                   "tf_peer_copy_available", "cuDeviceCanAccessPeer failed");
    assert_failure(tf_peer_copy(t.rt0, t.a, t.rt1, t.b, n), TF_ERROR_CUDA, "tf_peer_copy",
                   "cuDeviceCanAccessPeer failed");
    assert_null(raw_current_context());
    close_two_devices(&t);
}

/* Without direct access the copy still runs (the driver stages it); peer
 * access is not asked for. */
static void peer_copy_without_direct_access(void **state) {
    const size_t n = 100;
    struct two_devices t;
    unsigned char host[100];
    int32_t direct = -1;
    (void)state;
    REQUIRE_DOUBLE();
    open_two_devices(&t, n, 0);
    assert_ok(tf_peer_copy_available(t.rt1, t.rt0, &direct));
    assert_int_equal(direct, 0);
    fill_pattern(host, n, 42);
    assert_ok(tf_upload(t.rt1, host, t.b, n));
    tfd()->tfd_log_clear();
    assert_ok(tf_peer_copy(t.rt1, t.b, t.rt0, t.a, n));
    assert_int_equal(logged("cuCtxEnablePeerAccess"), 0);
    memset(host, 0, n);
    assert_ok(tf_runtime_sync(t.rt1)); /* the copy is on the source's slot */
    assert_ok(tf_download(t.rt0, t.a, host, n));
    assert_pattern(host, n, 42);
    close_two_devices(&t);
}

/* A refused cuCtxEnablePeerAccess costs speed, not the copy: logged once. */
static void peer_access_refusal_is_logged(void **state) {
    const size_t n = 64;
    struct two_devices t;
    unsigned char host[64];
    const char *warnings;
    (void)state;
    REQUIRE_DOUBLE();
    open_two_devices(&t, n, 1);
    fill_pattern(host, n, 43);
    assert_ok(tf_upload(t.rt0, host, t.a, n));
    INJECT("cuCtxEnablePeerAccess", 1, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 1);
    log_capture_start();
    assert_ok(tf_peer_copy(t.rt0, t.a, t.rt1, t.b, n));
    assert_ok(tf_peer_copy(t.rt0, t.a, t.rt1, t.b, n));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings,
                           "tf_peer_copy: cuCtxEnablePeerAccess from device 0 to device 1 "
                           "failed: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217)"));
    assert_null(strstr(strstr(warnings, "staged") + 1, "cuCtxEnablePeerAccess")); /* once */
    memset(host, 0, n);
    assert_ok(tf_runtime_sync(t.rt0)); /* the copies are on the source's slot */
    assert_ok(tf_download(t.rt1, t.b, host, n));
    assert_pattern(host, n, 43);
    close_two_devices(&t);
}

static const struct child_scenario scenarios[] = {
    {"without_async_entry_points", child_without_async_entry_points},
    {NULL, NULL},
};

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(alloc_is_stream_ordered_where_pools_exist),
        TF_TEST(memory_is_kept_in_the_librarys_pool_across_syncs),
        TF_TEST(alloc_without_pools_is_plain),
        TF_TEST(pool_support_is_asked_once),
        TF_TEST(pool_query_failure),
        TF_TEST(failed_capability_query_keeps_last_error),
        TF_TEST(missing_async_entry_points_fall_back),
        TF_TEST(alloc_of_zero_bytes_is_null),
        TF_TEST(alloc_failures_are_reported),
        TF_TEST(free_checks_its_address),
        TF_TEST(memory_lives_until_the_free_is_reached),
        TF_TEST(upload_waits_only_for_page_locked_sources),
        TF_TEST(upload_source_may_be_reused_at_once),
        TF_TEST(upload_rejects_bad_input),
        TF_TEST(upload_failures_are_reported),
        TF_TEST(copy_within_the_device),
        TF_TEST(copy_overlap_boundary_is_exact),
        TF_TEST(peer_copy_on_one_device),
        TF_TEST(peer_copy_between_devices),
        TF_TEST(peer_copy_without_direct_access),
        TF_TEST(peer_access_refusal_is_logged),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
