/* SPDX-License-Identifier: MIT OR Apache-2.0 */
#include "support/transfer_support.h"

#include <cudaTypedefs.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "support/test_support.h"

tf_runtime *runtime_with(uint32_t slots, uint32_t download_threads, uint32_t download_chunk_bytes) {
    tf_runtime *rt = NULL;
    tf_runtime_options o;
    tf_runtime_options_init(&o, sizeof o);
    o.stream_slots = slots;
    o.download_threads = download_threads;
    o.download_chunk_bytes = download_chunk_bytes;
    assert_ok(tf_runtime_new_with_options(0, &o, &rt));
    return rt;
}

uint64_t lib_alloc(tf_runtime *rt, size_t bytes) {
    uint64_t p = 0;
    assert_ok(tf_alloc(rt, bytes, &p));
    assert_true(p != 0);
    return p;
}

void lib_free(tf_runtime *rt, uint64_t ptr) { assert_ok(tf_free(rt, ptr)); }

static uint8_t pattern_byte(size_t i, uint32_t seed) {
    uint32_t x = (uint32_t)i ^ (uint32_t)(i >> 32) ^ (seed * 0x9E3779B9u);
    x *= 0x2545F491u;
    return (uint8_t)((x >> 24) ^ (i >> 12));
}

void fill_pattern(void *p, size_t n, uint32_t seed) {
    uint8_t *b = p;
    size_t i;
    for (i = 0; i < n; ++i) b[i] = pattern_byte(i, seed);
}

size_t pattern_mismatch(const void *p, size_t n, uint32_t seed) {
    const uint8_t *b = p;
    size_t i;
    for (i = 0; i < n; ++i)
        if (b[i] != pattern_byte(i, seed)) return i;
    return n;
}

struct host_call {
    size_t bytes;
    void *ptr;
    uint64_t dst;
    unsigned char value;
    void *stream;
};

static int32_t do_host_alloc(void *arg) {
    struct host_call *c = arg;
    PFN_cuMemHostAlloc_v2020 alloc;
    *(void **)&alloc = raw_driver_entry("cuMemHostAlloc", 2020);
    return alloc ? (int32_t)alloc(&c->ptr, c->bytes, 0) : -1;
}

static int32_t do_host_free(void *arg) {
    struct host_call *c = arg;
    PFN_cuMemFreeHost_v2000 release;
    *(void **)&release = raw_driver_entry("cuMemFreeHost", 2000);
    return release ? (int32_t)release(c->ptr) : -1;
}

static int32_t do_memset(void *arg) {
    struct host_call *c = arg;
    PFN_cuMemsetD8Async_v3020 set;
    *(void **)&set = raw_driver_entry("cuMemsetD8Async", 3020);
    return set ? (int32_t)set((CUdeviceptr)c->dst, c->value, c->bytes, (CUstream)c->stream) : -1;
}

void *pinned_alloc(tf_runtime *rt, size_t bytes) {
    struct host_call c = {bytes, NULL, 0, 0, NULL};
    assert_ok(tf_with_context(rt, do_host_alloc, &c));
    assert_non_null(c.ptr);
    return c.ptr;
}

void pinned_free(tf_runtime *rt, void *p) {
    struct host_call c = {0, p, 0, 0, NULL};
    assert_ok(tf_with_context(rt, do_host_free, &c));
}

void queue_memset(tf_runtime *rt, uint64_t dst, unsigned char value, size_t n) {
    struct host_call c = {n, NULL, dst, value, NULL};
    assert_ok(tf_runtime_stream(rt, &c.stream));
    assert_ok(tf_with_context(rt, do_memset, &c));
}

static tf_status copy_between(tf_runtime *src_rt, tf_runtime *dst_rt, int peer, uint64_t src,
                              uint64_t dst, size_t len) {
    return peer ? tf_peer_copy(src_rt, src, dst_rt, dst, len) : tf_copy(src_rt, src, dst, len);
}

/* One copy of len bytes from a + src_off to a + dst_off, checked: refused
 * when the ranges overlap, else exactly those bytes copied. */
static void check_one_copy(tf_runtime *src_rt, tf_runtime *dst_rt, int peer, uint64_t a,
                           size_t src_off, size_t dst_off, size_t len) {
    enum { SPAN = 32 };
    const char *op = peer ? "tf_peer_copy" : "tf_copy";
    const size_t diff = src_off > dst_off ? src_off - dst_off : dst_off - src_off;
    unsigned char before[SPAN], expect[SPAN], after[SPAN];
    tf_status st;
    fill_pattern(before, SPAN, (uint32_t)(src_off * 31 + dst_off));
    assert_ok(tf_upload(src_rt, before, a, SPAN));
    st = copy_between(src_rt, dst_rt, peer, a + src_off, a + dst_off, len);
    if (diff < len) {
        assert_failure(st, TF_ERROR_INVALID_ARGUMENT, op, "overlap");
        memcpy(expect, before, SPAN); /* nothing queued */
    } else {
        assert_ok(st);
        memcpy(expect, before, SPAN);
        memcpy(expect + dst_off, before + src_off, len);
    }
    assert_ok(tf_runtime_sync(src_rt));
    assert_ok(tf_download(src_rt, a, after, SPAN));
    assert_memory_equal(after, expect, SPAN);
}

void check_overlap_boundary(tf_runtime *src_rt, tf_runtime *dst_rt, uint64_t a, int peer) {
    const size_t len = 8;
    size_t diff;
    for (diff = len - 1; diff <= len + 1; ++diff) {
        check_one_copy(src_rt, dst_rt, peer, a, 0, diff, len);
        check_one_copy(src_rt, dst_rt, peer, a, diff, 0, len);
    }
}

int count_copy_threads(void) {
    DIR *dir = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    assert_non_null(dir);
    while ((e = readdir(dir)) != NULL) {
        char path[300], name[64] = "";
        FILE *f;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        if (fgets(name, sizeof name, f) && strncmp(name, "tf-download", 11) == 0) ++n;
        fclose(f);
    }
    closedir(dir);
    return n;
}

int copy_threads_settle(int expected) {
    /* pthread_join returns once the thread's work is over, but the kernel
     * may list the exiting task under /proc/self/task a little longer. */
    int i, n = count_copy_threads();
    for (i = 0; i < 1000 && n != expected; ++i) {
        usleep(1000);
        n = count_copy_threads();
    }
    return n;
}

/* ---- thread cancellation ------------------------------------------------- */

struct cancelled_call {
    tf_status (*call)(void *);
    void *arg;
    tf_status status;
    int returned;
};

static void cancelling_log(int32_t level, const char *message, void *user_data) {
    (void)level;
    (void)message;
    (void)user_data;
    pthread_testcancel();
}

static void *run_cancelled_call(void *p) {
    struct cancelled_call *c = p;
    pthread_cancel(pthread_self()); /* deferred: pending until a cancellation point */
    c->status = c->call(c->arg);
    c->returned = 1;
    pthread_testcancel();
    return NULL;
}

int call_with_cancel_pending(tf_status (*call)(void *), void *arg, tf_status *status) {
    struct cancelled_call c;
    pthread_t th;
    void *ret = NULL;
    c.call = call;
    c.arg = arg;
    c.status = TF_OK;
    c.returned = 0;
    assert_ok(tf_set_log_callback(cancelling_log, NULL));
    assert_int_equal(pthread_create(&th, NULL, run_cancelled_call, &c), 0);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_ok(tf_set_log_callback(NULL, NULL));
    assert_ptr_equal(ret, PTHREAD_CANCELED);
    if (status) *status = c.status;
    return c.returned;
}
