/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Self-test of the driver double's stream queues (tests/cuda_double/queue.h):
 * work runs when its stream runs it, in order, across streams through
 * event waits and the legacy stream; pageable and page-locked host memory
 * as the real driver treats them; events, queries, modes, faults, and what
 * frees and destroys do with queued work.  Uses no part of libtenferro_gpu;
 * every test skips when the loaded libcuda.so.1 is not the double. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/double_link.h"
#include "support/driver_table.h"

static const struct tfd_api *T;
static const struct driver_table *D;

#define CU(call) assert_int_equal((call), CUDA_SUCCESS)
#define NEED_DOUBLE()                       \
    do {                                    \
        if (T == NULL || D == NULL) skip(); \
    } while (0)

static int group_setup(void **state) {
    (void)state;
    T = tfd();
    D = driver_table();
    return T != NULL && D == NULL ? -1 : 0;
}

static CUcontext use_primary(void) {
    CUcontext c = NULL;
    CU(D->cuDevicePrimaryCtxRetain(&c, 0));
    CU(D->cuCtxSetCurrent(c));
    return c;
}

static CUstream new_stream(unsigned flags) {
    CUstream s = NULL;
    CU(D->cuStreamCreate(&s, flags));
    return s;
}

static CUdeviceptr new_words(size_t n) {
    CUdeviceptr p = 0;
    CU(D->cuMemAlloc(&p, n * 4));
    return p;
}

/* The first 32-bit word at p, read directly (bypassing the queues). */
static uint32_t word(CUdeviceptr p) {
    uint32_t v = 0;
    assert_int_equal(T->tfd_device_read(p, &v, sizeof v), 0);
    return v;
}

static const uint32_t kFresh = 0xCDCDCDCDu; /* new device memory */

/* ---- order within a stream and between streams ------------------------------------ */

static void work_runs_in_stream_order_when_stepped(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = new_words(4);
    assert_int_equal(T->tfd_execution(), TFD_EXEC_DEFERRED);
    CU(D->cuMemsetD32Async(p, 1, 4, s));
    CU(D->cuMemsetD32Async(p, 2, 4, s));
    assert_int_equal(word(p), kFresh);
    assert_int_equal(T->tfd_pending(s), 2);
    assert_int_equal(T->tfd_pending_total(), 2);
    assert_int_equal(T->tfd_step(s, 1), 1);
    assert_int_equal(word(p), 1);
    assert_int_equal(T->tfd_step(s, 5), 1);
    assert_int_equal(word(p), 2);
    assert_int_equal(T->tfd_step(s, 1), 0);
    assert_int_equal(T->tfd_pending(s), 0);
    assert_int_equal(T->tfd_step((void *)(uintptr_t)0x990, 1), 0); /* unknown stream */
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(p));
}

/* s2 waits for s1's record: syncing s2 runs s1 up to the record, no further;
 * a stream that does not wait sees none of s1's work. */
static void stream_wait_runs_the_other_stream_up_to_the_record(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s1 = new_stream(CU_STREAM_NON_BLOCKING), s2 = new_stream(CU_STREAM_NON_BLOCKING);
    CUstream s3 = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr src = new_words(1), waited = new_words(1), unordered = new_words(1);
    CUevent e = NULL;
    CU(D->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CU(D->cuMemsetD32Async(src, 7, 1, s1));
    CU(D->cuEventRecord(e, s1));
    CU(D->cuMemsetD32Async(src, 9, 1, s1)); /* after the record: not waited for */
    CU(D->cuStreamWaitEvent(s2, e, 0));
    CU(D->cuMemcpyDtoDAsync(waited, src, 4, s2));
    CU(D->cuMemcpyDtoDAsync(unordered, src, 4, s3));
    CU(D->cuStreamSynchronize(s3));
    assert_int_equal(word(unordered), kFresh); /* s1 never ran */
    CU(D->cuStreamSynchronize(s2));
    assert_int_equal(word(waited), 7);
    assert_int_equal(T->tfd_pending(s1), 1); /* the second memset */
    assert_int_equal(D->cuEventQuery(e), CUDA_SUCCESS);
    CU(D->cuStreamSynchronize(s1));
    assert_int_equal(word(src), 9);
    CU(D->cuEventDestroy(e));
    CU(D->cuStreamDestroy(s1));
    CU(D->cuStreamDestroy(s2));
    CU(D->cuStreamDestroy(s3));
    CU(D->cuMemFree(src));
    CU(D->cuMemFree(waited));
    CU(D->cuMemFree(unordered));
}

/* A wait uses the record made before it; a later record does not move it. */
static void wait_keeps_the_record_it_saw(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s1 = new_stream(CU_STREAM_NON_BLOCKING), s2 = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = new_words(1);
    CUevent e = NULL;
    CU(D->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CU(D->cuMemsetD32Async(p, 1, 1, s1));
    CU(D->cuEventRecord(e, s1));
    CU(D->cuStreamWaitEvent(s2, e, 0));
    CU(D->cuMemsetD32Async(p, 2, 1, s1));
    CU(D->cuEventRecord(e, s1)); /* supersedes the first record */
    CU(D->cuStreamSynchronize(s2));
    assert_int_equal(word(p), 1);
    assert_int_equal(D->cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CU(D->cuEventSynchronize(e));
    assert_int_equal(word(p), 2);
    /* a wait for a completed or never-recorded event queues nothing */
    CU(D->cuStreamWaitEvent(s2, e, 0));
    CUevent fresh = NULL;
    CU(D->cuEventCreate(&fresh, 0));
    CU(D->cuStreamWaitEvent(s2, fresh, 0));
    assert_int_equal(T->tfd_pending(s2), 0);
    CU(D->cuEventDestroy(fresh));
    CU(D->cuEventDestroy(e));
    CU(D->cuStreamDestroy(s1));
    CU(D->cuStreamDestroy(s2));
    CU(D->cuMemFree(p));
}

/* The legacy stream waits for the blocking streams and they for it;
 * non-blocking streams take no part. */
static void legacy_stream_orders_blocking_streams_only(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream blocking = new_stream(0), nb = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr a = new_words(1), b = new_words(1), c = new_words(1);
    CU(D->cuMemsetD32Async(a, 3, 1, blocking));
    CU(D->cuMemsetD32Async(b, 4, 1, nb));
    CU(D->cuMemcpyDtoDAsync(c, a, 4, NULL)); /* after the blocking stream's memset */
    CU(D->cuStreamSynchronize(NULL));
    assert_int_equal(word(c), 3);
    assert_int_equal(word(b), kFresh);
    CU(D->cuMemsetD32Async(c, 5, 1, NULL));
    CU(D->cuMemcpyDtoDAsync(a, c, 4, blocking)); /* after the legacy memset */
    CU(D->cuStreamSynchronize(blocking));
    assert_int_equal(word(a), 5);
    /* the synchronous copies go through the legacy stream */
    uint32_t host = 0;
    CU(D->cuMemsetD32Async(a, 6, 1, blocking));
    CU(D->cuMemcpyDtoH(&host, a, sizeof host));
    assert_int_equal(host, 6);
    host = 8;
    CU(D->cuMemcpyHtoD(a, &host, sizeof host));
    CU(D->cuMemcpyDtoD(c, a, 4));
    assert_int_equal(word(c), 8);
    CU(D->cuCtxSynchronize());
    assert_int_equal(word(b), 4);
    assert_int_equal(T->tfd_pending_total(), 0);
    CU(D->cuStreamDestroy(blocking));
    CU(D->cuStreamDestroy(nb));
    CU(D->cuMemFree(a));
    CU(D->cuMemFree(b));
    CU(D->cuMemFree(c));
}

/* ---- host memory ----------------------------------------------------------------------- */

/* Pageable memory: an upload's source is taken at the call, a download is
 * done when the call returns.  Page-locked memory: both happen when the
 * stream runs the copy. */
static void pageable_and_page_locked_copies(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = new_words(1);
    uint32_t pageable = 11;
    CU(D->cuMemcpyHtoDAsync(p, &pageable, 4, s));
    pageable = 12; /* reused at once: the copy keeps 11 */
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(word(p), 11);
    CU(D->cuMemsetD32Async(p, 13, 1, s));
    CU(D->cuMemcpyDtoHAsync(&pageable, p, 4, s));
    assert_int_equal(pageable, 13); /* done on return */
    assert_int_equal(T->tfd_pending(s), 0);

    uint32_t *locked = NULL;
    CU(D->cuMemHostAlloc((void **)&locked, 4096, 0));
    *locked = 21;
    CU(D->cuMemcpyHtoDAsync(p, locked, 4, s));
    *locked = 22; /* reused too early: the device reads 22 */
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(word(p), 22);
    CU(D->cuMemsetD32Async(p, 23, 1, s));
    CU(D->cuMemcpyDtoHAsync(locked, p, 4, s));
    assert_int_equal(*locked, 22); /* not written yet */
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(*locked, 23);
    /* cuMemFreeHost waits for queued copies into the block */
    CU(D->cuMemsetD32Async(p, 24, 1, s));
    CU(D->cuMemcpyDtoHAsync(locked, p, 4, s));
    CU(D->cuMemFreeHost(locked));
    assert_int_equal(T->tfd_pending(s), 0);
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(p));
}

/* ---- events and queries ---------------------------------------------------------------- */

static void events_complete_when_their_record_runs(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = new_words(1);
    CUevent e = NULL;
    CU(D->cuEventCreate(&e, 0));
    CU(D->cuEventQuery(e)); /* never recorded: complete */
    CU(D->cuEventSynchronize(e));
    CU(D->cuMemsetD32Async(p, 1, 1, s));
    CU(D->cuMemsetD32Async(p, 2, 1, s));
    CU(D->cuEventRecord(e, s));
    CU(D->cuMemsetD32Async(p, 3, 1, s));
    assert_int_equal(D->cuEventQuery(e), CUDA_ERROR_NOT_READY);
    assert_int_equal(D->cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    assert_int_equal(word(p), kFresh); /* queries make no progress by default */
    /* with query progress 1 each query runs one op */
    T->tfd_set_query_progress(1);
    assert_int_equal(D->cuEventQuery(e), CUDA_ERROR_NOT_READY);
    assert_int_equal(word(p), 1);
    assert_int_equal(D->cuEventQuery(e), CUDA_ERROR_NOT_READY);
    assert_int_equal(D->cuEventQuery(e), CUDA_SUCCESS); /* the record ran */
    assert_int_equal(word(p), 2);
    assert_int_equal(T->tfd_pending(s), 1);              /* stopped at the record */
    assert_int_equal(D->cuStreamQuery(s), CUDA_SUCCESS); /* ran the last memset */
    assert_int_equal(word(p), 3);
    T->tfd_set_query_progress(0);
    /* cuEventSynchronize runs the stream up to the record only */
    CU(D->cuEventRecord(e, s));
    CU(D->cuMemsetD32Async(p, 4, 1, s));
    CU(D->cuEventSynchronize(e));
    assert_int_equal(word(p), 3);
    assert_int_equal(T->tfd_pending(s), 1);
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(word(p), 4);
    CU(D->cuEventDestroy(e));
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(p));
}

/* ---- modes and reset ----------------------------------------------------------------------- */

static void sync_mode_runs_work_at_once(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = new_words(1);
    CU(D->cuMemsetD32Async(p, 1, 1, s)); /* queued (deferred) */
    T->tfd_set_execution(TFD_EXEC_SYNC);
    assert_int_equal(T->tfd_execution(), TFD_EXEC_SYNC);
    assert_int_equal(T->tfd_pending(s), 1); /* switching runs nothing */
    CU(D->cuMemsetD32Async(p, 2, 1, s));    /* runs the queue, then itself */
    assert_int_equal(T->tfd_pending(s), 0);
    assert_int_equal(word(p), 2);
    CUevent e = NULL;
    CU(D->cuEventCreate(&e, 0));
    CU(D->cuEventRecord(e, s));
    CU(D->cuEventQuery(e));
    T->tfd_set_execution(42); /* unknown: ignored */
    assert_int_equal(T->tfd_execution(), TFD_EXEC_SYNC);
    /* the older spellings */
    T->tfd_set_async_pending(1);
    assert_int_equal(T->tfd_execution(), TFD_EXEC_DEFERRED);
    CU(D->cuMemsetD32Async(p, 3, 1, s));
    T->tfd_complete_all();
    assert_int_equal(word(p), 3);
    T->tfd_set_async_pending(0);
    assert_int_equal(T->tfd_execution(), TFD_EXEC_SYNC);
    CU(D->cuEventDestroy(e));
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(p));
}

static void reset_runs_queued_work_and_restores_defaults(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = new_words(1);
    CU(D->cuMemsetD32Async(p, 5, 1, s));
    T->tfd_set_query_progress(3);
    T->tfd_set_background_delay_us(5);
    T->tfd_set_execution(TFD_EXEC_SYNC);
    T->tfd_reset();
    assert_int_equal(word(p), 5);
    assert_int_equal(T->tfd_pending_total(), 0);
    assert_int_equal(T->tfd_execution(), TFD_EXEC_DEFERRED);
    T->tfd_set_initialized(1);
    T->tfd_set_current(c);
    CU(D->cuMemsetD32Async(p, 6, 1, s));
    assert_int_equal(D->cuStreamQuery(s), CUDA_ERROR_NOT_READY); /* progress 0 again */
    assert_int_equal(word(p), 5);
    CU(D->cuStreamDestroy(s)); /* runs what is queued */
    assert_int_equal(word(p), 6);
    CU(D->cuMemFree(p));
}

/* What a host-side scalar read does: the device copies a value into
 * page-locked memory and then sets a flag there (through the mapped device
 * address); the host spins on the flag for up to `spin_ms`, and falls back to
 * waiting for the stream if it did not come.  Returns 1 when the spin saw
 * the flag, 0 when it fell back; *value is the value either way. */
static int read_with_spin(CUstream s, CUdeviceptr src, uint32_t *host, double spin_ms,
                          uint32_t *value) {
    uint32_t *flag = host + 1;
    CUdeviceptr flag_dev = 0;
    int spun = 0;
    __atomic_store_n(flag, 0u, __ATOMIC_RELAXED);
    CU(D->cuMemHostGetDevicePointer(&flag_dev, flag, 0));
    assert_true(flag_dev == (CUdeviceptr)(uintptr_t)flag); /* unified addressing */
    CU(D->cuMemcpyDtoHAsync(host, src, 4, s));
    CU(D->cuMemsetD32Async(flag_dev, 1, 1, s));
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 1) {
            spun = 1;
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double ms = 1e3 * (double)(now.tv_sec - start.tv_sec) +
                    1e-6 * (double)(now.tv_nsec - start.tv_nsec);
        if (ms > spin_ms) break;
        sched_yield(); /* under valgrind, one thread runs at a time */
    }
    if (!spun) CU(D->cuStreamSynchronize(s)); /* the blocking fallback */
    *value = __atomic_load_n(host, __ATOMIC_RELAXED);
    return spun;
}

/* In background mode host code spinning on page-locked memory the device
 * writes sees it change without any synchronizing call once the delay has
 * passed; with a delay longer than the spin, or in deferred mode, it must
 * fall back to waiting. */
static void background_mode_lets_host_spins_succeed(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = new_words(1);
    uint32_t *host = NULL, value = 0;
    CU(D->cuMemHostAlloc((void **)&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    CU(D->cuMemsetD32Async(p, 77, 1, s));
    /* deferred: nothing runs by itself, the spin falls back */
    assert_int_equal(read_with_spin(s, p, host, 20, &value), 0);
    assert_int_equal(value, 77);
    /* background, short delay: the spin sees the flag */
    T->tfd_set_background_delay_us(100);
    T->tfd_set_execution(TFD_EXEC_BACKGROUND);
    CU(D->cuMemsetD32Async(p, 78, 1, s));
    assert_int_equal(read_with_spin(s, p, host, 10000, &value), 1);
    assert_int_equal(value, 78);
    /* background, a delay longer than the spin: it falls back */
    T->tfd_set_background_delay_us(500 * 1000);
    CU(D->cuMemsetD32Async(p, 79, 1, s));
    assert_int_equal(read_with_spin(s, p, host, 20, &value), 0);
    assert_int_equal(value, 79);
    assert_int_equal(T->tfd_pending(s), 0);
    /* back to deferred: queued work stays queued */
    T->tfd_set_execution(TFD_EXEC_DEFERRED);
    CU(D->cuMemsetD32Async(p, 80, 1, s));
    usleep(50 * 1000);
    assert_int_equal(T->tfd_pending(s), 1);
    CU(D->cuMemFreeHost(host));
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(p));
}

/* ---- host functions ----------------------------------------------------------------------- */

struct host_seen {
    int calls;
    uint32_t value_seen;
    CUdeviceptr p;
    CUresult driver_call;
};

static void host_function(void *arg) {
    struct host_seen *h = arg;
    CUdeviceptr q = 0;
    h->calls++;
    T->tfd_device_read(h->p, &h->value_seen, 4);
    h->driver_call = D->cuMemAlloc(&q, 4); /* refused, as CUDA forbids it */
}

static void host_functions_run_in_order_and_may_not_call_the_driver(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    struct host_seen h = {0, 0, new_words(1), CUDA_SUCCESS};
    CU(D->cuMemsetD32Async(h.p, 31, 1, s));
    CU(D->cuLaunchHostFunc(s, host_function, &h));
    CU(D->cuMemsetD32Async(h.p, 32, 1, s));
    assert_int_equal(h.calls, 0);
    assert_int_equal(D->cuLaunchHostFunc(s, NULL, &h), CUDA_ERROR_INVALID_VALUE);
    unsigned long allocs = T->tfd_calls("cuMemAlloc");
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.value_seen, 31);
    assert_int_equal(h.driver_call, CUDA_ERROR_NOT_PERMITTED);
    assert_int_equal(T->tfd_calls("cuMemAlloc"), allocs); /* not even logged */
    assert_int_equal(word(h.p), 32);
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(h.p));
}

/* ---- faults --------------------------------------------------------------------------------- */

static const char kPtx[] =
    ".version 8.0\n.target sm_90\n"
    ".visible .entry tfd_fill_u32(\n)\n{\n\tret;\n}\n"
    ".visible .entry tfd_illegal_address()\n{\n\tret;\n}\n";

/* A faulting kernel faults its context when it runs; the sync that ran it
 * reports it; later work of the context is dropped. */
static void faults_come_when_the_work_runs(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUmodule m = NULL;
    CUfunction fill = NULL, ill = NULL;
    CU(D->cuModuleLoadDataEx(&m, kPtx, 0, NULL, NULL));
    CU(D->cuModuleGetFunction(&fill, m, "tfd_fill_u32"));
    CU(D->cuModuleGetFunction(&ill, m, "tfd_illegal_address"));
    CUdeviceptr p = new_words(4);
    uint64_t dp = p;
    uint32_t value = 41, n = 4;
    void *args[] = {&dp, &value, &n};
    CU(D->cuLaunchKernel(fill, 1, 1, 1, 4, 1, 1, 0, s, args, NULL));
    value = 42; /* parameters were copied at the launch */
    CU(D->cuLaunchKernel(ill, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CU(D->cuMemsetD32Async(p, 43, 1, s));
    assert_int_equal(T->tfd_context_poison(c), 0);
    assert_int_equal(word(p), kFresh);
    assert_int_equal(D->cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(word(p), 41); /* the fill ran, the memset was dropped */
    assert_int_equal(T->tfd_pending(s), 0);
    T->tfd_poison_context(c, 0);
    /* a stream-ordered free runs after the work queued before it ... */
    CUdeviceptr late = new_words(1);
    CU(D->cuMemsetD32Async(late, 1, 1, s));
    CU(D->cuMemFreeAsync(late, s));
    assert_int_equal(D->cuMemFreeAsync(late, s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D->cuMemFree(late), CUDA_ERROR_INVALID_VALUE);
    CU(D->cuStreamSynchronize(s));
    /* ... and work that runs after it faults (checked at the call, while the
     * memory still existed) */
    late = new_words(1);
    CU(D->cuMemFreeAsync(late, s));
    CU(D->cuMemsetD32Async(late, 1, 1, s));
    assert_int_equal(D->cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    T->tfd_poison_context(c, 0);
    CU(D->cuModuleUnload(m));
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(p));
}

/* ---- frees and destruction --------------------------------------------------------------- */

static void frees_and_destruction_run_queued_work(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING), other = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = new_words(1), q = new_words(1);
    long allocs = T->tfd_live(TFD_DEVICE_ALLOCS);
    /* a stream-ordered free happens when the stream gets there */
    CU(D->cuMemFreeAsync(q, s));
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), allocs);
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), allocs - 1);
    /* cuMemFree waits for every stream of the device */
    q = new_words(1);
    CU(D->cuMemsetD32Async(p, 1, 1, other));
    CU(D->cuMemsetD32Async(q, 2, 1, s));
    CU(D->cuMemFree(q));
    assert_int_equal(T->tfd_pending_total(), 0);
    assert_int_equal(word(p), 1);
    /* cuStreamDestroy runs what the stream still had */
    CU(D->cuMemsetD32Async(p, 3, 1, s));
    CU(D->cuStreamDestroy(s));
    assert_int_equal(word(p), 3);
    /* the end of the context runs its streams' work */
    CU(D->cuMemsetD32Async(p, 4, 1, other));
    uint32_t direct_copy = 0;
    CUdeviceptr keep = T->tfd_device_alloc(0, 4);
    CU(D->cuMemcpyDtoDAsync(keep, p, 4, other));
    CU(D->cuDevicePrimaryCtxRelease(0));
    assert_int_equal(T->tfd_device_read(keep, &direct_copy, 4), 0);
    assert_int_equal(direct_copy, 4);
    assert_int_equal(T->tfd_pending_total(), 0);
    T->tfd_device_free(keep);
}

/* ---- work of the companion doubles (tfd_enqueue) -------------------------------------- */

struct job {
    int runs, drops, result;
};

static int job_run(void *arg) {
    struct job *j = arg;
    j->runs++;
    return j->result;
}

static void job_drop(void *arg) { ((struct job *)arg)->drops++; }

static void companion_work_is_queued_too(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary();
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    struct job a = {0, 0, 0}, b = {0, 0, CUDA_ERROR_LAUNCH_FAILED}, dropped = {0, 0, 0};
    CU(T->tfd_enqueue(s, "job", job_run, &a, job_drop, NULL));
    assert_int_equal(a.runs + a.drops, 0);
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(a.runs, 1);
    assert_int_equal(a.drops, 1);
    /* a nonzero result faults the context; later work is dropped unrun */
    CU(T->tfd_enqueue(s, "job", job_run, &b, job_drop, NULL));
    CU(T->tfd_enqueue(s, "job", job_run, &dropped, job_drop, NULL));
    assert_int_equal(D->cuStreamSynchronize(s), CUDA_ERROR_LAUNCH_FAILED);
    assert_int_equal(dropped.runs, 0);
    assert_int_equal(dropped.drops, 1);
    T->tfd_poison_context(c, 0);
    /* a bad stream queues nothing and leaves the argument alone */
    assert_int_equal(T->tfd_enqueue((void *)(uintptr_t)0x990, "job", job_run, &a, job_drop, NULL),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(T->tfd_enqueue(s, "job", NULL, &a, job_drop, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(a.drops, 1);
    CU(D->cuStreamDestroy(s));
}

/* ---- the NCCL double ------------------------------------------------------------------- */

struct nccl_id {
    char internal[128];
};

struct nccl {
    int (*unique_id)(struct nccl_id *id);
    int (*init_rank)(void **comm, int nranks, struct nccl_id id, int rank);
    int (*all_reduce)(const void *, void *, size_t, int, int, void *, void *);
    int (*destroy)(void *comm);
};

static void load_nccl(struct nccl *n) {
    void *lib = dlopen("libnccl.so.2", RTLD_NOW);
    assert_non_null(lib);
    *(void **)&n->unique_id = dlsym(lib, "ncclGetUniqueId");
    *(void **)&n->init_rank = dlsym(lib, "ncclCommInitRank");
    *(void **)&n->all_reduce = dlsym(lib, "ncclAllReduce");
    *(void **)&n->destroy = dlsym(lib, "ncclCommDestroy");
    assert_true(n->unique_id && n->init_rank && n->all_reduce && n->destroy);
}

/* Two ranks in this process on two streams: syncing one stream makes the
 * other arrive (its stream runs up to its part).  A collective that can
 * never complete -- a rank of this process with nothing queued, or a rank
 * whose stream waits for work after the other rank's part -- faults the
 * context with CUDA_ERROR_LAUNCH_TIMEOUT instead of hanging. */
static void collectives_meet_or_fault(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary();
    struct nccl n;
    load_nccl(&n);
    struct nccl_id id;
    void *comm[2];
    CUstream s[2] = {new_stream(CU_STREAM_NON_BLOCKING), new_stream(CU_STREAM_NON_BLOCKING)};
    CUdeviceptr p[2] = {new_words(4), new_words(4)};
    assert_int_equal(n.unique_id(&id), 0);
    for (int r = 0; r < 2; ++r) {
        assert_int_equal(n.init_rank(&comm[r], 2, id, r), 0);
        CU(D->cuMemsetD32Async(p[r], (unsigned)(r + 1), 4, s[r]));
        assert_int_equal(n.all_reduce((void *)(uintptr_t)p[r], (void *)(uintptr_t)p[r], 4,
                                      2 /* int32 */, 0 /* sum */, comm[r], s[r]),
                         0);
    }
    assert_int_equal(n.init_rank(&comm[0], 2, id, 0), 5); /* that rank is here already */
    CU(D->cuStreamSynchronize(s[0]));
    assert_int_equal(T->tfd_pending(s[1]), 0); /* rank 1 was made to arrive */
    assert_int_equal(word(p[0]), 3);
    assert_int_equal(word(p[1]), 3);
    /* rank 1 has nothing queued for the next one */
    assert_int_equal(
        n.all_reduce((void *)(uintptr_t)p[0], (void *)(uintptr_t)p[0], 4, 2, 0, comm[0], s[0]), 0);
    assert_int_equal(D->cuStreamSynchronize(s[0]), CUDA_ERROR_LAUNCH_TIMEOUT);
    T->tfd_poison_context(c, 0);
    /* a cycle: rank 1's stream waits for work queued after rank 0's part */
    CUevent e = NULL;
    CU(D->cuEventCreate(&e, 0));
    struct nccl_id id2;
    void *comm2[2];
    assert_int_equal(n.unique_id(&id2), 0);
    assert_int_equal(n.init_rank(&comm2[0], 2, id2, 0), 0);
    assert_int_equal(n.init_rank(&comm2[1], 2, id2, 1), 0);
    assert_int_equal(
        n.all_reduce((void *)(uintptr_t)p[0], (void *)(uintptr_t)p[0], 4, 2, 0, comm2[0], s[0]), 0);
    CU(D->cuEventRecord(e, s[0]));
    CU(D->cuStreamWaitEvent(s[1], e, 0));
    assert_int_equal(
        n.all_reduce((void *)(uintptr_t)p[1], (void *)(uintptr_t)p[1], 4, 2, 0, comm2[1], s[1]), 0);
    assert_int_equal(D->cuStreamSynchronize(s[0]), CUDA_ERROR_LAUNCH_TIMEOUT);
    assert_int_equal(T->tfd_pending_total(), 0);
    T->tfd_poison_context(c, 0);
    for (int r = 0; r < 2; ++r) {
        assert_int_equal(n.destroy(comm[r]), 0);
        assert_int_equal(n.destroy(comm2[r]), 0);
        CU(D->cuStreamDestroy(s[r]));
        CU(D->cuMemFree(p[r]));
    }
    assert_int_equal(n.destroy(comm[0]), 4);
    CU(D->cuEventDestroy(e));
}

/* ---- threads ------------------------------------------------------------------------------ */

enum { THREADS = 4, ROUNDS = 100 };

struct producer {
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr p;
    int failures;
};

/* Each thread queues on its own stream while the others synchronize theirs:
 * every thread sees its own last value. */
static void *produce(void *arg) {
    struct producer *t = arg;
    if (D->cuCtxSetCurrent(t->ctx) != CUDA_SUCCESS) {
        t->failures++;
        return NULL;
    }
    for (int i = 1; i <= ROUNDS; ++i) {
        uint32_t back = 0;
        if (D->cuMemsetD32Async(t->p, (unsigned)i, 1, t->stream) != CUDA_SUCCESS ||
            D->cuMemcpyDtoHAsync(&back, t->p, 4, t->stream) != CUDA_SUCCESS || back != (uint32_t)i)
            t->failures++;
    }
    return NULL;
}

static void threads_progress_their_own_streams(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary();
    struct producer t[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; ++i) {
        t[i].ctx = c;
        t[i].stream = new_stream(CU_STREAM_NON_BLOCKING);
        t[i].p = new_words(1);
        t[i].failures = 0;
        assert_int_equal(pthread_create(&th[i], NULL, produce, &t[i]), 0);
    }
    for (int i = 0; i < THREADS; ++i) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(t[i].failures, 0);
        CU(D->cuStreamDestroy(t[i].stream));
        CU(D->cuMemFree(t[i].p));
    }
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, double_selftest_setup, double_selftest_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(work_runs_in_stream_order_when_stepped),
        TEST(stream_wait_runs_the_other_stream_up_to_the_record),
        TEST(wait_keeps_the_record_it_saw),
        TEST(legacy_stream_orders_blocking_streams_only),
        TEST(pageable_and_page_locked_copies),
        TEST(events_complete_when_their_record_runs),
        TEST(sync_mode_runs_work_at_once),
        TEST(reset_runs_queued_work_and_restores_defaults),
        TEST(background_mode_lets_host_spins_succeed),
        TEST(host_functions_run_in_order_and_may_not_call_the_driver),
        TEST(faults_come_when_the_work_runs),
        TEST(frees_and_destruction_run_queued_work),
        TEST(companion_work_is_queued_too),
        TEST(collectives_meet_or_fault),
        TEST(threads_progress_their_own_streams),
    };
    return cmocka_run_group_tests_name("cuda_double_queue", tests, group_setup, NULL);
}
