/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Self-test of the driver double's stream capture and graphs
 * (tests/cuda_double/graph.h): captured work is recorded, not run, and runs
 * at each launch; kernel parameters are copied at capture time; calls that
 * would wait for a capturing stream fail with the real driver's codes and
 * invalidate the capture; the capture modes; event record and wait nodes;
 * executable graph update; launch order.  Uses no part of libtenferro_gpu;
 * every test skips when the loaded libcuda.so.1 is not the double. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cuda.h>
#include <pthread.h>
#include <string.h>

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

static CUstream new_stream(void) {
    CUstream s = NULL;
    CU(D->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}

static CUdeviceptr new_words(size_t n) {
    CUdeviceptr p = 0;
    CU(D->cuMemAlloc(&p, n * 4));
    return p;
}

static uint32_t word(CUdeviceptr p) {
    uint32_t v = 0;
    assert_int_equal(T->tfd_device_read(p, &v, sizeof v), 0);
    return v;
}

static CUstreamCaptureStatus status_of(CUstream s) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CU(D->cuStreamIsCapturing(s, &st));
    return st;
}

/* Ends the capture on s and instantiates it. */
static CUgraphExec end_and_instantiate(CUstream s) {
    CUgraph g = NULL;
    CUgraphExec x = NULL;
    CU(D->cuStreamEndCapture(s, &g));
    assert_non_null(g);
    CU(D->cuGraphInstantiateWithFlags(&x, g, 0));
    CU(D->cuGraphDestroy(g));
    return x;
}

static const char kFillPtx[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry tfd_fill_u32(.param .u64 d, .param .u32 v, .param .u32 n)\n{\n\tret;\n}\n";

static const uint32_t kFresh = 0xCDCDCDCDu;

/* Work queued on a capturing stream does not run; each launch runs it. */
static void captured_work_runs_at_each_launch(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream();
    CUdeviceptr a = new_words(1), b = new_words(1);
    assert_int_equal(status_of(s), CU_STREAM_CAPTURE_STATUS_NONE);
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(status_of(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU(D->cuMemsetD32Async(a, 5, 1, s));
    CU(D->cuMemcpyDtoDAsync(b, a, 4, s));
    assert_int_equal(T->tfd_capture_nodes(s), 2);
    assert_int_equal(T->tfd_pending(s), 0);
    CUgraphExec x = end_and_instantiate(s);
    assert_int_equal(status_of(s), CU_STREAM_CAPTURE_STATUS_NONE);
    assert_int_equal(T->tfd_live(TFD_GRAPHS), 0);
    assert_int_equal(T->tfd_live(TFD_GRAPH_EXECS), 1);
    assert_int_equal(word(b), kFresh); /* nothing ran */
    CU(D->cuGraphLaunch(x, s));
    assert_int_equal(T->tfd_pending(s), 2);
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(word(b), 5);
    uint32_t seven = 7;
    assert_int_equal(T->tfd_device_write(b, &seven, 4), 0);
    CU(D->cuGraphLaunch(x, s)); /* again: the same work */
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(word(b), 5);
    CU(D->cuGraphExecDestroy(x));
    assert_int_equal(D->cuGraphExecDestroy(x), CUDA_ERROR_INVALID_VALUE);
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(a));
    CU(D->cuMemFree(b));
}

/* Kernel parameters are copied at capture time. */
static void kernel_parameters_are_copied_at_capture(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream();
    CUmodule m = NULL;
    CUfunction fill = NULL;
    CU(D->cuModuleLoadDataEx(&m, kFillPtx, 0, NULL, NULL));
    CU(D->cuModuleGetFunction(&fill, m, "tfd_fill_u32"));
    CUdeviceptr p = new_words(2);
    uint32_t value = 11, n = 2;
    void *args[] = {&p, &value, &n};
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuLaunchKernel(fill, 1, 1, 1, 2, 1, 1, 0, s, args, NULL));
    value = 99; /* after the capture: not what the graph runs */
    CUgraphExec x = end_and_instantiate(s);
    CU(D->cuGraphLaunch(x, s));
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(word(p), 11);
    CU(D->cuGraphExecDestroy(x));
    CU(D->cuModuleUnload(m));
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(p));
}

/* Ends a capture that must have been invalidated. */
static void expect_invalidated(CUstream s) {
    CUgraph g = (CUgraph)(uintptr_t)1;
    assert_int_equal(status_of(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    assert_int_equal(D->cuMemsetD32Async(0, 0, 0, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_int_equal(D->cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(g);
    assert_int_equal(status_of(s), CU_STREAM_CAPTURE_STATUS_NONE);
}

/* Each call that would wait for the capturing stream fails and invalidates
 * it; the stream works again once the capture is ended. */
static void waiting_calls_invalidate_the_capture(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream();
    CUdeviceptr p = new_words(1);
    uint32_t host = 0;
    CUevent e = NULL;
    CU(D->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(D->cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(D->cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(D->cuMemcpyDtoHAsync(&host, p, 4, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuEventRecord(e, s));
    assert_int_equal(D->cuEventSynchronize(e), CUDA_ERROR_CAPTURED_EVENT);
    expect_invalidated(s);
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuEventRecord(e, s));
    assert_int_equal(D->cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT);
    expect_invalidated(s);
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(D->cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUdeviceptr q = 0;
    assert_int_equal(D->cuMemAllocAsync(&q, 64, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);
    /* After the end the stream runs work again, and the event is usable. */
    CU(D->cuMemsetD32Async(p, 3, 1, s));
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(word(p), 3);
    CU(D->cuEventQuery(e));
    CU(D->cuEventDestroy(e));
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(p));
}

/* A capturing stream may wait only for work of its own capture; external
 * event nodes record and wait at each launch. */
static void events_in_a_capture(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream(), other = new_stream();
    CUdeviceptr p = new_words(1), q = new_words(1);
    CUevent outside = NULL, node = NULL;
    CU(D->cuEventCreate(&outside, CU_EVENT_DISABLE_TIMING));
    CU(D->cuEventCreate(&node, CU_EVENT_DISABLE_TIMING));
    /* The external flags are for captures only. */
    assert_int_equal(D->cuStreamWaitEvent(s, outside, CU_EVENT_WAIT_EXTERNAL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D->cuEventRecordWithFlags(node, s, CU_EVENT_RECORD_EXTERNAL),
                     CUDA_ERROR_INVALID_VALUE);
    CU(D->cuMemsetD32Async(p, 1, 1, other));
    CU(D->cuEventRecord(outside, other));
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(D->cuStreamWaitEvent(s, outside, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    expect_invalidated(s);
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuStreamWaitEvent(s, outside, CU_EVENT_WAIT_EXTERNAL));
    CU(D->cuMemcpyDtoDAsync(q, p, 4, s));
    CU(D->cuEventRecordWithFlags(node, s, CU_EVENT_RECORD_EXTERNAL));
    assert_int_equal(T->tfd_capture_nodes(s), 3);
    CUgraphExec x = end_and_instantiate(s);
    CU(D->cuEventQuery(node)); /* never recorded yet: the launch records it */
    CU(D->cuGraphLaunch(x, s));
    assert_int_equal(D->cuEventQuery(node), CUDA_ERROR_NOT_READY);
    CU(D->cuEventSynchronize(node)); /* runs s, which first runs `other` to its record */
    assert_int_equal(word(q), 1);
    CU(D->cuGraphExecDestroy(x));
    CU(D->cuEventDestroy(outside));
    CU(D->cuEventDestroy(node));
    CU(D->cuStreamDestroy(s));
    CU(D->cuStreamDestroy(other));
    CU(D->cuMemFree(p));
    CU(D->cuMemFree(q));
}

struct thread_call {
    CUcontext ctx;
    CUstream stream;
    CUresult alloc, end;
};

static void *alloc_on_another_thread(void *arg) {
    struct thread_call *c = arg;
    CUdeviceptr p = 0;
    D->cuCtxSetCurrent(c->ctx);
    c->alloc = D->cuMemAlloc(&p, 64);
    if (c->alloc == CUDA_SUCCESS) D->cuMemFree(p);
    D->cuCtxSetCurrent(NULL);
    return NULL;
}

static void *end_on_another_thread(void *arg) {
    struct thread_call *c = arg;
    CUgraph g = NULL;
    D->cuCtxSetCurrent(c->ctx);
    c->end = D->cuStreamEndCapture(c->stream, &g);
    if (g != NULL) D->cuGraphDestroy(g);
    D->cuCtxSetCurrent(NULL);
    return NULL;
}

static struct thread_call on_thread(void *(*fn)(void *), CUcontext ctx, CUstream s) {
    struct thread_call c = {ctx, s, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fn, &c), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    return c;
}

/* Global mode forbids unsafe calls everywhere, thread-local mode on the
 * capturing thread, relaxed mode nowhere; only a relaxed capture may be
 * ended by another thread. */
static void capture_modes(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext ctx = use_primary();
    CUstream s = new_stream();
    CUgraph g = NULL;
    CUdeviceptr p = 0;

    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_int_equal(on_thread(end_on_another_thread, ctx, s).end,
                     CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    assert_int_equal(status_of(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(on_thread(alloc_on_another_thread, ctx, s).alloc,
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);

    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    assert_int_equal(on_thread(alloc_on_another_thread, ctx, s).alloc, CUDA_SUCCESS);
    assert_int_equal(status_of(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(D->cuMemAlloc(&p, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);

    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(on_thread(alloc_on_another_thread, ctx, s).alloc, CUDA_SUCCESS);
    CU(D->cuMemAlloc(&p, 64));
    CU(D->cuMemFree(p));
    assert_int_equal(status_of(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(on_thread(end_on_another_thread, ctx, s).end, CUDA_SUCCESS);
    assert_int_equal(status_of(s), CU_STREAM_CAPTURE_STATUS_NONE);

    /* Misuse of the capture calls themselves. */
    assert_int_equal(D->cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    assert_int_equal(D->cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_RELAXED),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(D->cuStreamBeginCapture(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED),
                     CUDA_ERROR_ILLEGAL_STATE);
    CU(D->cuStreamEndCapture(s, &g));
    CU(D->cuGraphDestroy(g));
    assert_int_equal(D->cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    CU(D->cuStreamDestroy(s));
}

/* Same node kinds in the same order: updated in place; otherwise refused
 * and the exec runs its old work. */
static void exec_update_compares_node_kinds(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s = new_stream();
    CUdeviceptr p = new_words(1);
    CUgraph g = NULL;
    CUgraphExecUpdateResultInfo info;
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuMemsetD32Async(p, 1, 1, s));
    CUgraphExec x = end_and_instantiate(s);

    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuMemsetD32Async(p, 2, 1, s));
    CU(D->cuStreamEndCapture(s, &g));
    CU(D->cuGraphExecUpdate(x, g, &info));
    assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CU(D->cuGraphDestroy(g));
    CU(D->cuGraphLaunch(x, s));
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(word(p), 2);

    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuMemsetD32Async(p, 3, 1, s));
    CU(D->cuMemsetD32Async(p, 4, 1, s));
    CU(D->cuStreamEndCapture(s, &g));
    assert_int_equal(D->cuGraphExecUpdate(x, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    CU(D->cuGraphDestroy(g));
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuMemcpyDtoDAsync(p, p + 0, 0, s)); /* a zero-length copy queues nothing */
    CU(D->cuMemsetD8Async(p, 9, 4, s));
    CU(D->cuStreamEndCapture(s, &g));
    assert_int_equal(D->cuGraphExecUpdate(x, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    CU(D->cuGraphDestroy(g));
    CU(D->cuGraphLaunch(x, s)); /* unchanged */
    CU(D->cuStreamSynchronize(s));
    assert_int_equal(word(p), 2);
    CU(D->cuGraphExecDestroy(x));
    CU(D->cuStreamDestroy(s));
    CU(D->cuMemFree(p));
}

/* A launch runs after the exec's previous launch, on any stream; a graph
 * cannot be launched into a capture. */
static void launches_are_ordered(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary();
    CUstream s1 = new_stream(), s2 = new_stream(), s3 = new_stream();
    CUdeviceptr p = new_words(1), q = new_words(1);
    CU(D->cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuMemsetD32Async(p, 8, 1, s1));
    CUgraphExec x = end_and_instantiate(s1);
    CU(D->cuGraphLaunch(x, s1));
    CU(D->cuGraphLaunch(x, s2));
    CU(D->cuMemcpyDtoDAsync(q, p, 4, s2));
    CU(D->cuStreamSynchronize(s2)); /* runs s1's launch first */
    assert_int_equal(T->tfd_pending(s1), 0);
    assert_int_equal(word(q), 8);
    CU(D->cuStreamBeginCapture(s3, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(D->cuGraphLaunch(x, s3), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s3);
    CU(D->cuGraphExecDestroy(x));
    CU(D->cuStreamDestroy(s1));
    CU(D->cuStreamDestroy(s2));
    CU(D->cuStreamDestroy(s3));
    CU(D->cuMemFree(p));
    CU(D->cuMemFree(q));
}

/* A context's graphs go with it; so does an open capture. */
static void graphs_are_reclaimed_with_their_context(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext ctx = T->tfd_create_context(0);
    T->tfd_set_current(ctx);
    CUstream s = new_stream(), t = new_stream();
    CUgraph g = NULL;
    CU(D->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(D->cuStreamEndCapture(s, &g));
    CUgraphExec x = NULL;
    CU(D->cuGraphInstantiateWithFlags(&x, g, 0));
    CU(D->cuStreamBeginCapture(t, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_int_equal(T->tfd_live(TFD_GRAPHS), 1);
    assert_int_equal(T->tfd_live(TFD_GRAPH_EXECS), 1);
    T->tfd_set_current(NULL);
    T->tfd_destroy_context(ctx);
    assert_int_equal(T->tfd_live(TFD_GRAPHS), 0);
    assert_int_equal(T->tfd_live(TFD_GRAPH_EXECS), 0);
    assert_int_equal(T->tfd_reclaimed(TFD_GRAPHS), 1);
    assert_int_equal(T->tfd_reclaimed(TFD_GRAPH_EXECS), 1);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, double_selftest_setup, double_selftest_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(captured_work_runs_at_each_launch),
        TEST(kernel_parameters_are_copied_at_capture),
        TEST(waiting_calls_invalidate_the_capture),
        TEST(events_in_a_capture),
        TEST(capture_modes),
        TEST(exec_update_compares_node_kinds),
        TEST(launches_are_ordered),
        TEST(graphs_are_reclaimed_with_their_context),
    };
    return cmocka_run_group_tests_name("cuda_double_graph", tests, group_setup, NULL);
}
