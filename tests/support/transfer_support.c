#include "support/transfer_support.h"

#include <cudaTypedefs.h>
#include <dirent.h>
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
