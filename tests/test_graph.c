/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Graph capture on a slot (tf_graph_capture_begin / _end / _update /
 * _abort, tf_graph_launch): which calls are captured, which are refused and
 * that a refusal leaves the capture intact, failed captures that leave
 * nothing behind, update in place, what the library tracks about a slot
 * (scalar reads, page-locked blocks, retirements) when a graph runs on it,
 * graphs released across threads, fork, and a capture begun by hand on the
 * slot's stream.  The kernels are the real PTX of test_kernels (the double
 * knows them by name), so every test that injects no failure also runs on a
 * GPU. */
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/kernels.h"
#include "support/raw_memory.h"
#include "support/test_support.h"
#include "support/transfer_support.h"

/* ---- the raw driver, for captures begun by hand and for checks ------------ */

struct raw_graph_api {
    PFN_cuStreamBeginCapture_v10010 begin;
    PFN_cuStreamEndCapture_v10000 end;
    PFN_cuStreamIsCapturing_v10000 is_capturing;
    PFN_cuGraphInstantiateWithFlags_v11040 instantiate;
    PFN_cuGraphLaunch_v10000 launch;
    PFN_cuGraphExecDestroy_v10000 exec_destroy;
    PFN_cuGraphDestroy_v10000 destroy;
    PFN_cuMemsetD32Async_v3020 memset32;
};

/* Stores entry point `name` into the function pointer at `slot`. */
static void entry(const char *name, int version, void *slot) {
    void *fn = raw_driver_entry(name, version);
    assert_non_null(fn);
    memcpy(slot, &fn, sizeof fn);
}

static const struct raw_graph_api *raw(void) {
    static struct raw_graph_api a;
    if (!a.begin) {
        entry("cuStreamBeginCapture", 10010, &a.begin);
        entry("cuStreamEndCapture", 10000, &a.end);
        entry("cuStreamIsCapturing", 10000, &a.is_capturing);
        entry("cuGraphInstantiateWithFlags", 11040, &a.instantiate);
        entry("cuGraphLaunch", 10000, &a.launch);
        entry("cuGraphExecDestroy", 10000, &a.exec_destroy);
        entry("cuGraphDestroy", 10000, &a.destroy);
        entry("cuMemsetD32Async", 3020, &a.memset32);
    }
    return &a;
}

#define CU(call) assert_int_equal((int)(call), CUDA_SUCCESS)

static void *slot_stream(tf_runtime *rt) {
    void *s = NULL;
    assert_ok(tf_runtime_stream(rt, &s));
    return s;
}

static void *primary_of(tf_runtime *rt) {
    void *c = NULL;
    assert_ok(tf_runtime_primary_context(rt, &c));
    return c;
}

static CUstreamCaptureStatus capture_status(tf_runtime *rt) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    void *saved = raw_current_context();
    raw_set_current_context(primary_of(rt));
    CU(raw()->is_capturing((CUstream)slot_stream(rt), &st));
    raw_set_current_context(saved);
    return st;
}

static void fill_words(tf_runtime *rt, uint64_t d, uint32_t value, size_t n) {
    uint32_t *h = malloc(n * 4);
    size_t i;
    for (i = 0; i < n; ++i) h[i] = value;
    dev_upload(rt, d, h, n * 4);
    free(h);
}

static void expect_words(tf_runtime *rt, uint64_t d, uint32_t value, size_t n) {
    uint32_t *h = malloc(n * 4);
    size_t i;
    dev_download(rt, h, d, n * 4);
    for (i = 0; i < n; ++i)
        if (h[i] != value) fail_msg("word %zu is 0x%x, want 0x%x", i, h[i], value);
    free(h);
}

/* ---- kernels and captures -------------------------------------------------- */

struct kernels {
    tf_module *module;
    void *fill, *add;
};

static struct kernels load_kernels(tf_runtime *rt) {
    struct kernels k;
    assert_ok(tf_module_load(rt, kTestKernelsPtx, sizeof kTestKernelsPtx, &k.module));
    assert_ok(tf_module_function(k.module, "tfd_fill_u32", &k.fill));
    assert_ok(tf_module_function(k.module, "tfd_add_f32", &k.add));
    return k;
}

static tf_launch_config blocks_for(uint32_t n) {
    tf_launch_config c;
    tf_launch_config_init(&c, sizeof c);
    c.block_x = 256;
    c.grid_x = (n + 255) / 256;
    return c;
}

static tf_status fill(tf_runtime *rt, const struct kernels *k, uint64_t d, uint32_t value,
                      uint32_t n) {
    tf_launch_config c = blocks_for(n);
    void *args[3] = {&d, &value, &n};
    return tf_kernel_launch(rt, k->fill, &c, args);
}

static tf_status add(tf_runtime *rt, const struct kernels *k, uint64_t x, uint64_t y, uint64_t out,
                     uint32_t n) {
    tf_launch_config c = blocks_for(n);
    void *args[4] = {&x, &y, &out, &n};
    return tf_kernel_launch(rt, k->add, &c, args);
}

/* Nodes captured so far on rt's slot (the double only; -1 on a GPU). */
static long nodes(tf_runtime *rt) {
    return tfd() ? (long)tfd()->tfd_capture_nodes(slot_stream(rt)) : -1;
}

/* Ends rt's slot's capture into a new graph. */
static tf_graph *end_capture(tf_runtime *rt) {
    tf_graph *g = NULL;
    assert_ok(tf_graph_capture_end(rt, &g));
    assert_non_null(g);
    return g;
}

/* A graph of one fill of n words of d with value. */
static tf_graph *fill_graph(tf_runtime *rt, const struct kernels *k, uint64_t d, uint32_t value,
                            uint32_t n) {
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, k, d, value, n));
    return end_capture(rt);
}

static float *floats(size_t n, float base) {
    float *f = malloc(n * sizeof *f);
    size_t i;
    for (i = 0; i < n; ++i) f[i] = base + (float)i * 0.25f;
    return f;
}

/* ---- a capture begun by hand on the slot's stream ---------------------------- */

/* Regression (issue 19): inside a capture the caller began with
 * cuStreamBeginCapture on tf_runtime_stream's stream, the calls that wait
 * for the device failed with a raw CUDA error and invalidated the capture,
 * and a pageable tf_upload was captured although its promise (the source
 * is free on return) cannot hold for a replay.  Each now refuses with
 * TF_ERROR_RUNTIME_STATE and the capture stays intact: the graph runs and
 * gives the captured work's data.  tf_download_scalar asks the driver
 * nothing (its cost goal leaves no room for cuStreamIsCapturing): it refuses
 * the library's own captures only (docs/graphs.md). */
static void capture_begun_by_hand_is_refused_and_left_intact(void **state) {
    tf_runtime *rt = new_runtime();
    const size_t big = 1 << 20, words = big / 4;
    uint64_t d = dev_alloc(rt, big);
    unsigned char *host = malloc(big);
    void *pinned = NULL, *stream = slot_stream(rt);
    CUgraph g = NULL;
    CUgraphExec x = NULL;
    (void)state;
    memset(host, 0x5a, big);
    assert_ok(tf_host_alloc(rt, 4096, &pinned));
    fill_words(rt, d, 1, words);
    raw_set_current_context(primary_of(rt));
    CU(raw()->begin((CUstream)stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU(raw()->memset32(d, 7, words, (CUstream)stream));
    assert_failure(tf_runtime_sync(rt), TF_ERROR_RUNTIME_STATE, "tf_runtime_sync",
                   "capturing a graph begun outside this library");
    assert_failure(tf_download(rt, d, host, 64), TF_ERROR_RUNTIME_STATE, "tf_download",
                   "begun outside this library");
    assert_failure(tf_download(rt, d, host, big), TF_ERROR_RUNTIME_STATE, "tf_download",
                   "begun outside this library");
    assert_failure(tf_download(rt, d, pinned, 4096), TF_ERROR_RUNTIME_STATE, "tf_download",
                   "begun outside this library");
    assert_failure(tf_upload(rt, host, d, 64), TF_ERROR_RUNTIME_STATE, "tf_upload",
                   "begun outside this library");
    assert_failure(tf_upload(rt, host, d, big), TF_ERROR_RUNTIME_STATE, "tf_upload",
                   "begun outside this library");
    assert_failure(tf_upload(rt, pinned, d, 4096), TF_ERROR_RUNTIME_STATE, "tf_upload",
                   "begun outside this library");
    assert_int_equal(capture_status(rt), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    raw_set_current_context(primary_of(rt));
    CU(raw()->end((CUstream)stream, &g));
    CU(raw()->instantiate(&x, g, 0));
    CU(raw()->destroy(g));
    expect_words(rt, d, 1, words); /* nothing ran during the capture */
    raw_set_current_context(primary_of(rt));
    CU(raw()->launch(x, (CUstream)stream));
    raw_set_current_context(NULL);
    assert_ok(tf_runtime_sync(rt));
    expect_words(rt, d, 7, words);
    raw_set_current_context(primary_of(rt));
    CU(raw()->exec_destroy(x));
    raw_set_current_context(NULL);
    assert_ok(tf_host_free(rt, pinned));
    dev_free(rt, d);
    free(host);
    assert_ok(tf_runtime_release(rt));
}

/* ---- what is captured ------------------------------------------------------- */

/* Kernels, tf_copy, asynchronous copies, tf_stream_enqueue work and events
 * are recorded, not run; each launch runs them on the current inputs. */
static void queue_only_calls_are_captured_and_run_at_each_launch(void **state) {
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    const uint32_t n = 1000;
    uint64_t x = dev_alloc(rt, n * 4), y = dev_alloc(rt, n * 4), sum = dev_alloc(rt, n * 4),
             copy = dev_alloc(rt, n * 4);
    float *hx = floats(n, 1), *hy = floats(n, 100), *got = malloc(n * 4);
    void *pinned_in = NULL, *pinned_out = NULL;
    tf_event *ev = NULL;
    tf_graph *g = NULL;
    unsigned long queued;
    uint32_t i;
    (void)state;
    assert_ok(tf_host_alloc(rt, n * 4, &pinned_in));
    assert_ok(tf_host_alloc(rt, n * 4, &pinned_out));
    assert_ok(tf_event_new(rt, &ev));
    memcpy(pinned_in, hx, n * 4);
    dev_upload(rt, y, hy, n * 4);
    fill_words(rt, sum, 0, n);
    assert_ok(tf_graph_capture_begin(rt));
    queued = tfd() ? tfd()->tfd_pending(slot_stream(rt)) : 0; /* the capture's fence */
    assert_ok(tf_upload_async(rt, pinned_in, x, n * 4));      /* x from page-locked memory */
    assert_ok(add(rt, &k, x, y, sum, n));                     /* sum = x + y */
    assert_ok(tf_copy(rt, sum, copy, n * 4));                 /* copy = sum */
    assert_ok(tf_download_async(rt, copy, pinned_out, n * 4));
    assert_ok(tf_event_record(rt, ev));
    if (tfd()) {
        assert_int_equal(nodes(rt), 5);
        assert_int_equal(tfd()->tfd_pending(slot_stream(rt)), queued); /* nothing queued */
    }
    g = end_capture(rt);
    assert_int_equal(nodes(rt) > 0, 0);
    assert_ok(tf_runtime_sync(rt));
    expect_words(rt, sum, 0, n); /* the capture ran nothing */
    for (int pass = 0; pass < 2; ++pass) {
        memcpy(pinned_in, hx, n * 4);
        assert_ok(tf_graph_launch(rt, g));
        assert_ok(tf_event_synchronize(ev)); /* the launch recorded it */
        memcpy(got, pinned_out, n * 4);
        for (i = 0; i < n; ++i)
            if (got[i] != hx[i] + hy[i]) fail_msg("pass %d: got[%u] = %g", pass, i, got[i]);
        for (i = 0; i < n; ++i) hx[i] += 1000; /* the next launch reads the new input */
    }
    assert_ok(tf_graph_release(g));
    assert_ok(tf_event_release(ev));
    assert_ok(tf_host_free(rt, pinned_in));
    assert_ok(tf_host_free(rt, pinned_out));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, x), dev_free(rt, y), dev_free(rt, sum), dev_free(rt, copy);
    free(hx), free(hy), free(got);
    assert_ok(tf_runtime_release(rt));
}

struct gemm_args {
    int32_t (*sgemm)(void *, int, int, int, int, int, const float *, const float *, int,
                     const float *, int, const float *, float *, int);
    uint64_t a, b, c;
};

static int32_t gemm_call(void *handle, void *stream, void *user_data) {
    const struct gemm_args *g = user_data;
    const float one = 1.0f, zero = 0.0f;
    (void)stream;
    return g->sgemm(handle, 0, 0, 2, 2, 2, &one, (const float *)(uintptr_t)g->a, 2,
                    (const float *)(uintptr_t)g->b, 2, &zero, (float *)(uintptr_t)g->c, 2);
}

/* cuBLAS work through tf_cublas_enqueue is captured too (host-mode scalars
 * are read at the call, as cuBLAS copies them into the graph). */
static void cublas_work_is_captured(void **state) {
    tf_runtime *rt = new_runtime();
    int32_t have = 0;
    struct gemm_args g;
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c[4] = {0};
    tf_graph *graph = NULL;
    void *fn = NULL;
    (void)state;
    assert_ok(tf_runtime_supports(rt, TF_CAP_CUBLAS, &have));
    if (!have) {
        tf_runtime_release(rt);
        skip();
    }
    assert_ok(tf_cublas_symbol("cublasSgemm_v2", &fn));
    memcpy(&g.sgemm, &fn, sizeof fn);
    g.a = dev_alloc(rt, 16), g.b = dev_alloc(rt, 16), g.c = dev_alloc(rt, 16);
    dev_upload(rt, g.a, a, 16);
    dev_upload(rt, g.b, b, 16);
    dev_upload(rt, g.c, c, 16);
    assert_ok(tf_graph_capture_begin(rt)); /* the slot's first cuBLAS call: the handle is made */
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, gemm_call, &g));
    graph = end_capture(rt);
    dev_download(rt, c, g.c, 16);
    assert_true(c[0] == 0 && c[3] == 0);
    assert_ok(tf_graph_launch(rt, graph));
    dev_download(rt, c, g.c, 16);
    /* column-major: c = a * b */
    assert_true(c[0] == 23 && c[1] == 34 && c[2] == 31 && c[3] == 46);
    assert_ok(tf_graph_release(graph));
    dev_free(rt, g.a), dev_free(rt, g.b), dev_free(rt, g.c);
    assert_ok(tf_runtime_release(rt));
}

/* ---- what is refused ---------------------------------------------------------- */

static void noop_release(void *resource, void *user_data) { (void)resource, (void)user_data; }

/* Each call that would wait for the device, or promise what a launch cannot
 * repeat, refuses with TF_ERROR_RUNTIME_STATE naming the capture, adds
 * nothing to it and leaves it intact: the graph then runs the captured
 * work. */
static void waiting_calls_are_refused_and_the_capture_stays_intact(void **state) {
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    const size_t big = 1 << 20;
    uint64_t d = dev_alloc(rt, big), p = 0;
    unsigned char *host = malloc(big);
    void *pinned = NULL;
    uint32_t word = 0;
    int32_t done = 0;
    tf_event *ev = NULL;
    tf_graph *other = NULL, *g = NULL;
    long before;
    const char *const capturing = "is capturing a graph (begun by tf_graph_capture_begin";
    (void)state;
    memset(host, 1, big);
    assert_ok(tf_host_alloc(rt, 4096, &pinned));
    assert_ok(tf_event_new(rt, &ev));
    assert_ok(tf_alloc(rt, 64, &p));
    other = fill_graph(rt, &k, d, 3, 16);
    fill_words(rt, d, 1, big / 4);
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, d, 9, (uint32_t)(big / 4)));
    assert_ok(tf_event_record(rt, ev));
    before = nodes(rt);
    assert_failure(tf_runtime_sync(rt), TF_ERROR_RUNTIME_STATE, "tf_runtime_sync", capturing,
                   "waits for the device");
    assert_failure(tf_download_scalar(rt, d, &word, 4), TF_ERROR_RUNTIME_STATE,
                   "tf_download_scalar", capturing);
    assert_failure(tf_download(rt, d, host, 64), TF_ERROR_RUNTIME_STATE, "tf_download", capturing);
    assert_failure(tf_download(rt, d, host, big), TF_ERROR_RUNTIME_STATE, "tf_download", capturing);
    assert_failure(tf_download(rt, d, pinned, 4096), TF_ERROR_RUNTIME_STATE, "tf_download",
                   capturing);
    assert_failure(tf_upload(rt, host, d, 64), TF_ERROR_RUNTIME_STATE, "tf_upload", capturing,
                   "use tf_upload_async");
    assert_failure(tf_upload(rt, host, d, big), TF_ERROR_RUNTIME_STATE, "tf_upload", capturing);
    assert_failure(tf_upload(rt, pinned, d, 4096), TF_ERROR_RUNTIME_STATE, "tf_upload", capturing);
    assert_failure(tf_workspace_retire(rt, NULL, noop_release, NULL), TF_ERROR_RUNTIME_STATE,
                   "tf_workspace_retire", capturing);
    assert_failure(tf_workspace_poll(rt), TF_ERROR_RUNTIME_STATE, "tf_workspace_poll", capturing);
    assert_failure(tf_free(rt, p), TF_ERROR_RUNTIME_STATE, "tf_free", "slot 0 is capturing",
                   "was not allocated in this capture", "again at every launch");
    assert_failure(tf_graph_launch(rt, other), TF_ERROR_RUNTIME_STATE, "tf_graph_launch", capturing,
                   "not launched inside a capture");
    assert_failure(tf_graph_capture_begin(rt), TF_ERROR_RUNTIME_STATE, "tf_graph_capture_begin",
                   capturing, "one graph at a time");
    assert_failure(tf_event_synchronize(ev), TF_ERROR_RUNTIME_STATE, "tf_event_synchronize",
                   "latest record is a node of the graph slot 0 is capturing");
    assert_failure(tf_event_query(ev, &done), TF_ERROR_RUNTIME_STATE, "tf_event_query",
                   "latest record is a node");
    assert_int_equal(nodes(rt), before);
    g = end_capture(rt);
    assert_ok(tf_event_synchronize(ev)); /* recorded only by launches: none yet */
    expect_words(rt, d, 1, big / 4);
    assert_ok(tf_graph_launch(rt, g));
    assert_ok(tf_event_synchronize(ev));
    assert_ok(tf_download_scalar(rt, d + big - 4, &word, 4));
    assert_int_equal(word, 9);
    assert_ok(tf_graph_release(g));
    assert_ok(tf_graph_release(other));
    assert_ok(tf_event_release(ev));
    assert_ok(tf_free(rt, p));
    assert_ok(tf_host_free(rt, pinned));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    free(host);
    assert_ok(tf_runtime_release(rt));
}

/* A capture belongs to its slot: other slots wait, read and allocate as
 * usual, and the host pool serves every thread. */
static void other_slots_are_not_affected(void **state) {
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL, *s1 = NULL;
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64), e = dev_alloc(rt, 64), p = 0;
    void *block = NULL;
    uint32_t word = 0;
    tf_graph *g = NULL;
    (void)state;
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_bind_slot(rt, 1, &s1));
    fill_words(s1, e, 4, 16);
    assert_ok(tf_graph_capture_begin(s0));
    assert_ok(fill(s0, &k, d, 5, 16));
    assert_ok(tf_runtime_sync(s1));
    assert_ok(tf_download_scalar(s1, e, &word, 4));
    assert_int_equal(word, 4);
    assert_ok(tf_alloc(s1, 64, &p));
    assert_ok(tf_free(s1, p));
    assert_ok(tf_host_alloc(s1, 4096, &block));
    assert_ok(tf_host_free(s1, block));
    assert_ok(tf_workspace_retire(s1, NULL, noop_release, NULL));
    /* The device pool's trim and out-of-memory retry wait for every slot of
     * the device: for the capturing one, for its work queued before the
     * capture, never on its stream. */
    assert_ok(tf_memory_trim(s1, 0));
    if (tfd()) {
        INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
        assert_ok(tf_alloc(s1, 64, &p));
        assert_ok(tf_free(s1, p));
    }
    g = end_capture(s0);
    assert_ok(tf_graph_launch(s1, g)); /* any slot of the runtime */
    assert_ok(tf_download_scalar(s1, d, &word, 4));
    assert_int_equal(word, 5);
    assert_ok(tf_graph_release(g));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d), dev_free(rt, e);
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(s1));
    assert_ok(tf_runtime_release(rt));
}

/* ---- failed captures leave nothing behind ---------------------------------------- */

static long live(int kind) { return tfd()->tfd_live(kind); }

/* The slot runs work again and holds no capture. */
static void expect_slot_usable(tf_runtime *rt, const struct kernels *k, uint64_t d) {
    tf_graph *g = NULL;
    assert_failure(tf_graph_capture_end(rt, &g), TF_ERROR_RUNTIME_STATE, "tf_graph_capture_end",
                   "is not capturing a graph");
    assert_null(g);
    assert_ok(fill(rt, k, d, 77, 4));
    expect_words(rt, d, 77, 4);
}

/* A failed begin starts nothing; a failed instantiation keeps nothing;
 * a capture a call broke (here the caller's own cuStreamSynchronize inside
 * a tf_stream_enqueue) is over, and the slot works as before. */
static int32_t sync_own_stream(void *stream, void *user_data) {
    PFN_cuStreamSynchronize_v2000 sync = NULL;
    (void)user_data;
    entry("cuStreamSynchronize", 2000, &sync);
    return sync((CUstream)stream) == CUDA_SUCCESS ? 0 : 1;
}

static void failed_captures_leave_the_slot_usable(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64);
    tf_graph *g = NULL;
    INJECT("cuStreamBeginCapture", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_graph_capture_begin(rt), TF_ERROR_CUDA, "tf_graph_capture_begin",
                   "cuStreamBeginCapture failed");
    expect_slot_usable(rt, &k, d);

    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, d, 1, 4));
    INJECT("cuGraphInstantiateWithFlags", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_graph_capture_end(rt, &g), TF_ERROR_OUT_OF_MEMORY, "tf_graph_capture_end",
                   "cuGraphInstantiateWithFlags failed",
                   "the capture is over and nothing was kept");
    assert_null(g);
    assert_int_equal(live(TFD_GRAPHS) + live(TFD_GRAPH_EXECS), 0);
    expect_slot_usable(rt, &k, d);

    /* A captured call that fails is not captured; the capture goes on. */
    assert_ok(tf_graph_capture_begin(rt));
    INJECT("cuLaunchKernel", 1, CUDA_ERROR_INVALID_VALUE, 1);
    assert_failure(fill(rt, &k, d, 2, 4), TF_ERROR_CUDA, "tf_kernel_launch", "cuLaunchKernel");
    assert_ok(fill(rt, &k, d, 3, 4));
    assert_int_equal(nodes(rt), 1);
    g = end_capture(rt);
    assert_ok(tf_graph_launch(rt, g));
    expect_words(rt, d, 3, 4);
    assert_ok(tf_graph_release(g));

    /* The caller's own driver call breaks the capture. */
    assert_ok(tf_graph_capture_begin(rt));
    assert_failure(tf_stream_enqueue(rt, sync_own_stream, NULL), TF_ERROR_CALLBACK,
                   "tf_stream_enqueue", "callback returned 1");
    assert_int_equal(capture_status(rt), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    assert_failure(tf_graph_capture_end(rt, &g), TF_ERROR_CUDA, "tf_graph_capture_end",
                   "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
                   "invalidated the capture; it is over, nothing was kept");
    assert_int_equal(tf_last_error_code(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_int_equal(live(TFD_GRAPHS) + live(TFD_GRAPH_EXECS), 0);
    expect_slot_usable(rt, &k, d);
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* An end the driver refuses leaves the capture open, and says so: ending it
 * again works.  When the driver cannot even tell, it counts as open. */
static void failed_end_keeps_the_capture_open(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64);
    tf_graph *g = NULL;
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, d, 4, 4));
    INJECT("cuStreamEndCapture", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_graph_capture_end(rt, &g), TF_ERROR_CUDA, "tf_graph_capture_end",
                   "cuStreamEndCapture failed", "the capture is still open");
    assert_int_equal(capture_status(rt), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(nodes(rt), 1);
    INJECT("cuStreamEndCapture", 1, CUDA_ERROR_UNKNOWN, 1);
    INJECT("cuStreamIsCapturing", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_graph_capture_abort(rt), TF_ERROR_CUDA, "tf_graph_capture_abort",
                   "the capture is still open");
    g = end_capture(rt);
    assert_ok(tf_graph_launch(rt, g));
    expect_words(rt, d, 4, 4);
    assert_ok(tf_graph_release(g));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* A begin on a capturing slot, an end from a slot that does not capture,
 * and an abort leave the capture as it was; an end through a bound handle
 * of the capturing slot, on another thread, ends it (relaxed mode). */
struct end_on_thread {
    tf_runtime *bound;
    tf_graph *graph;
    tf_status st;
};

static void *end_from_thread(void *arg) {
    struct end_on_thread *e = arg;
    e->st = tf_graph_capture_end(e->bound, &e->graph);
    return NULL;
}

static void capture_belongs_to_its_slot(void **state) {
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL, *s1 = NULL;
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64);
    struct end_on_thread e = {NULL, NULL, TF_ERROR_INTERNAL};
    pthread_t t;
    tf_graph *g = NULL;
    (void)state;
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_bind_slot(rt, 1, &s1));
    assert_ok(tf_graph_capture_begin(s0));
    assert_ok(fill(s0, &k, d, 6, 4));
    assert_failure(tf_graph_capture_begin(s0), TF_ERROR_RUNTIME_STATE, "tf_graph_capture_begin",
                   "slot 0 is capturing a graph", "one graph at a time");
    assert_failure(tf_graph_capture_end(s1, &g), TF_ERROR_RUNTIME_STATE, "tf_graph_capture_end",
                   "slot 1 is not capturing a graph");
    assert_failure(tf_graph_capture_abort(s1), TF_ERROR_RUNTIME_STATE, "tf_graph_capture_abort",
                   "slot 1 is not capturing");
    assert_int_equal(capture_status(s0), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    e.bound = s0;
    assert_int_equal(pthread_create(&t, NULL, end_from_thread, &e), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_ok(e.st);
    assert_ok(tf_graph_launch(s1, e.graph));
    assert_ok(tf_runtime_sync(s1));
    expect_words(s1, d, 6, 4);
    /* an abort drops what was captured */
    assert_ok(tf_graph_capture_begin(s0));
    assert_ok(fill(s0, &k, d, 8, 4));
    assert_ok(tf_graph_capture_abort(s0));
    assert_int_equal(capture_status(s0), CU_STREAM_CAPTURE_STATUS_NONE);
    expect_words(s0, d, 6, 4);
    if (tfd()) assert_int_equal(live(TFD_GRAPHS) + live(TFD_GRAPH_EXECS), 1);
    assert_ok(tf_graph_release(e.graph));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(s1));
    assert_ok(tf_runtime_release(rt));
}

/* ---- update in place ------------------------------------------------------------ */

/* The same calls on other memory: updated in place, no instantiation; other
 * calls: instantiated anew.  Either way the handle runs the new work. */
static void update_in_place_or_anew(void **state) {
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t a = dev_alloc(rt, 64), b = dev_alloc(rt, 64);
    unsigned long instantiations = 0;
    int32_t in_place = -1;
    tf_graph *g = NULL;
    (void)state;
    fill_words(rt, a, 0, 16);
    fill_words(rt, b, 0, 16);
    g = fill_graph(rt, &k, a, 1, 16);
    if (tfd()) instantiations = tfd()->tfd_calls("cuGraphInstantiateWithFlags");
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, b, 2, 16)); /* other pointer, other value */
    assert_ok(tf_graph_capture_update(rt, g, &in_place));
    assert_int_equal(in_place, 1);
    if (tfd()) assert_int_equal(tfd()->tfd_calls("cuGraphInstantiateWithFlags"), instantiations);
    assert_ok(tf_graph_launch(rt, g));
    expect_words(rt, b, 2, 16);
    expect_words(rt, a, 0, 16);
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, a, 3, 16));
    assert_ok(tf_copy(rt, a, b, 64)); /* another shape */
    assert_ok(tf_graph_capture_update(rt, g, &in_place));
    assert_int_equal(in_place, 0);
    assert_ok(tf_graph_launch(rt, g));
    expect_words(rt, b, 3, 16);
    /* the flag is optional */
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, a, 4, 16));
    assert_ok(tf_copy(rt, a, b, 64));
    assert_ok(tf_graph_capture_update(rt, g, NULL));
    assert_ok(tf_graph_launch(rt, g));
    expect_words(rt, b, 4, 16);
    if (tfd()) assert_int_equal(live(TFD_GRAPH_EXECS), 1);
    assert_ok(tf_graph_release(g));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, a), dev_free(rt, b);
    assert_ok(tf_runtime_release(rt));
}

/* A failed update falls back to a new instantiation; a failed
 * instantiation leaves the graph running its earlier capture; a graph of
 * another runtime is refused before the capture ends. */
static void failed_updates_keep_the_earlier_graph(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime(), *other = new_runtime();
    struct kernels k = load_kernels(rt), ko = load_kernels(other);
    uint64_t a = dev_alloc(rt, 64), o = dev_alloc(other, 64);
    int32_t in_place = -1;
    tf_graph *g = NULL, *foreign = NULL;
    g = fill_graph(rt, &k, a, 1, 16);
    foreign = fill_graph(other, &ko, o, 1, 16);
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, a, 2, 16));
    INJECT("cuGraphExecUpdate", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_ok(tf_graph_capture_update(rt, g, &in_place));
    assert_int_equal(in_place, 0); /* instantiated anew */
    assert_ok(tf_graph_launch(rt, g));
    expect_words(rt, a, 2, 16);
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, a, 3, 16));
    assert_ok(fill(rt, &k, a, 3, 16));
    INJECT("cuGraphInstantiateWithFlags", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    in_place = -1;
    assert_failure(tf_graph_capture_update(rt, g, &in_place), TF_ERROR_OUT_OF_MEMORY,
                   "tf_graph_capture_update", "the graph still runs its earlier one");
    assert_int_equal(in_place, -1);
    assert_ok(tf_graph_launch(rt, g));
    expect_words(rt, a, 2, 16);
    assert_ok(tf_graph_capture_begin(rt));
    assert_failure(tf_graph_capture_update(rt, foreign, &in_place), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_capture_update", "the graph belongs to another runtime");
    assert_failure(tf_graph_launch(rt, foreign), TF_ERROR_INVALID_ARGUMENT, "tf_graph_launch",
                   "belongs to another runtime");
    assert_int_equal(capture_status(rt), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_ok(tf_graph_capture_abort(rt));
    assert_ok(tf_graph_release(g));
    assert_ok(tf_graph_release(foreign));
    assert_ok(tf_module_release(k.module));
    assert_ok(tf_module_release(ko.module));
    dev_free(rt, a), dev_free(other, o);
    assert_ok(tf_runtime_release(rt));
    assert_ok(tf_runtime_release(other));
}

/* ---- what the library tracks about a slot, when a graph runs on it ------------ */

static int logged(const char *entry_name) {
    size_t i, n = tfd()->tfd_log_count();
    int count = 0;
    for (i = 0; i < n; ++i) count += strcmp(tfd()->tfd_log_name(i), entry_name) == 0;
    return count;
}

static double us_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)(t.tv_sec - t0->tv_sec) + 1e-3 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* Reads until the slot's idle streak trusts the stream idle (NOTE [idle
 * streak]); false when a read takes too long for a streak to form here. */
static int build_idle_streak(tf_runtime *rt, uint64_t d) {
    uint32_t word = 0;
    double slowest = 0;
    int i;
    for (i = 0; i < 12; ++i) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_ok(tf_download_scalar(rt, d, &word, 4));
        if (i > 0 && us_since(&t0) > slowest) slowest = us_since(&t0);
    }
    return slowest <= 6; /* half the window: a streak is assured */
}

/* Regression: a graph launch is queued work the scalar read's idle streak
 * does not see.  After it, the next read asks the stream (cuStreamQuery)
 * and takes the busy path, and sees the graph's result.  Before the fix a
 * long streak sent it down the idle path unasked. */
static void scalar_read_after_a_launch_asks_the_stream(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64);
    uint32_t word = 0;
    tf_graph *g = NULL;
    fill_words(rt, d, 1, 16);
    g = fill_graph(rt, &k, d, 42, 16);
    tfd()->tfd_set_execution(TFD_EXEC_SYNC);
    if (!build_idle_streak(rt, d)) {
        assert_ok(tf_graph_release(g));
        assert_ok(tf_module_release(k.module));
        dev_free(rt, d);
        tf_runtime_release(rt);
        skip();
    }
    tfd()->tfd_log_clear();
    assert_ok(tf_download_scalar(rt, d, &word, 4));
    assert_int_equal(logged("cuStreamQuery"), 0); /* the streak trusts the stream idle */
    tfd()->tfd_set_execution(TFD_EXEC_DEFERRED);
    assert_ok(tf_graph_launch(rt, g));
    tfd()->tfd_log_clear();
    assert_ok(tf_download_scalar(rt, d, &word, 4));
    assert_int_equal(word, 42);
    assert_int_equal(logged("cuStreamQuery"), 1);
    assert_int_equal(logged("cuLaunchKernel"), 1); /* the busy path: the read kernel */
    assert_ok(tf_graph_release(g));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

static tf_host_pool_stats pool_stats(tf_runtime *rt) {
    tf_host_pool_stats s;
    tf_host_pool_stats_init(&s, sizeof s);
    assert_ok(tf_host_stats(rt, &s));
    return s;
}

/* Regression: each launch of a graph that copies into a tf_host_alloc block
 * records a use of the block, so a free after the launch keeps the block
 * from the next allocation until the launch has run.  Before the fix the
 * block went back to the cache at once and was handed out while the
 * launch could still write it. */
static void page_locked_block_waits_for_the_launch(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    uint64_t d = dev_alloc(rt, 4096);
    void *block = NULL, *again = NULL;
    tf_graph *g = NULL;
    fill_words(rt, d, 0x11111111u, 1024);
    assert_ok(tf_host_alloc(rt, 4096, &block));
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(tf_download_async(rt, d, block, 4096));
    g = end_capture(rt);
    assert_ok(tf_graph_launch(rt, g)); /* queued, not run (deferred) */
    assert_ok(tf_host_free(rt, block));
    assert_int_equal(pool_stats(rt).pending_frees, 1);
    assert_ok(tf_host_alloc(rt, 4096, &again));
    assert_ptr_not_equal(again, block);
    assert_ok(tf_host_free(rt, again));
    assert_ok(tf_runtime_sync(rt)); /* the launch ran: the block is free */
    assert_int_equal(pool_stats(rt).pending_frees, 0);
    assert_ok(tf_graph_release(g));
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* Memory a graph copies and that was freed or unregistered after the
 * capture refuses the launch: the graph would write someone else's
 * memory.  tf_host_record_use inside a capture counts as a copy of the
 * graph. */
static void launch_refuses_page_locked_memory_freed_after_the_capture(void **state) {
    tf_runtime *rt = new_runtime();
    const size_t n = 8192;
    uint64_t d = dev_alloc(rt, n);
    unsigned char *mem = NULL;
    void *block = NULL, *used = NULL;
    tf_graph *g = NULL, *h = NULL, *u = NULL;
    (void)state;
    assert_int_equal(posix_memalign((void **)&mem, 4096, n), 0);
    assert_ok(tf_host_register(rt, mem, n));
    assert_ok(tf_host_alloc(rt, n, &block));
    assert_ok(tf_host_alloc(rt, n, &used));
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(tf_upload_async(rt, block, d, n));
    g = end_capture(rt);
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(tf_download_async(rt, d, mem, n));
    h = end_capture(rt);
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(tf_host_record_use(rt, (unsigned char *)used + 100));
    u = end_capture(rt);
    assert_ok(tf_graph_launch(rt, g));
    assert_ok(tf_graph_launch(rt, h));
    assert_ok(tf_graph_launch(rt, u));
    assert_ok(tf_runtime_sync(rt));
    assert_ok(tf_host_free(rt, block));
    assert_failure(tf_graph_launch(rt, g), TF_ERROR_INVALID_ARGUMENT, "tf_graph_launch",
                   "freed or unregistered after the capture");
    assert_ok(tf_host_unregister(rt, mem));
    assert_failure(tf_graph_launch(rt, h), TF_ERROR_INVALID_ARGUMENT, "tf_graph_launch",
                   "freed or unregistered after the capture");
    assert_ok(tf_host_free(rt, used));
    assert_failure(tf_graph_launch(rt, u), TF_ERROR_INVALID_ARGUMENT, "tf_graph_launch",
                   "freed or unregistered");
    assert_ok(tf_graph_release(g));
    assert_ok(tf_graph_release(h));
    assert_ok(tf_graph_release(u));
    dev_free(rt, d);
    free(mem);
    assert_ok(tf_runtime_release(rt));
}

/* A block used by the slot before its capture, freed or unregistered while
 * the slot captures: the pool bounds that work with the capture's fence
 * (recorded before it began), never records into the capture. */
static void page_locked_memory_used_before_the_capture(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    const size_t n = 4096;
    uint64_t d = dev_alloc(rt, n);
    unsigned char *mem = NULL;
    void *block = NULL, *again = NULL;
    long before;
    tf_graph *g = NULL;
    assert_int_equal(posix_memalign((void **)&mem, 4096, n), 0);
    assert_ok(tf_host_register(rt, mem, n));
    assert_ok(tf_host_alloc(rt, n, &block));
    assert_ok(tf_download_async(rt, d, block, n)); /* queued, not run */
    assert_ok(tf_download_async(rt, d, mem, n));
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, d, 5, 4));
    before = nodes(rt);
    assert_ok(tf_host_free(rt, block));
    assert_int_equal(pool_stats(rt).pending_frees, 1); /* behind the fence */
    assert_ok(tf_host_alloc(rt, n, &again));
    assert_ptr_not_equal(again, block);
    assert_ok(tf_host_unregister(rt, mem)); /* waits for the work before the capture */
    assert_int_equal(nodes(rt), before);
    assert_int_equal(capture_status(rt), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    g = end_capture(rt);
    assert_ok(tf_graph_launch(rt, g));
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(pool_stats(rt).pending_frees, 0);
    expect_words(rt, d, 5, 1);
    assert_ok(tf_host_free(rt, again));
    assert_ok(tf_graph_release(g));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    free(mem);
    assert_ok(tf_runtime_release(rt));
}

struct release_count {
    int released;
};

static void count_release(void *resource, void *user_data) {
    (void)resource;
    ((struct release_count *)user_data)->released++;
}

/* A retirement after a launch is released only once the launch has run. */
static void retirement_waits_for_the_launch(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64);
    struct release_count c = {0};
    tf_graph *g = NULL;
    g = fill_graph(rt, &k, d, 9, 4);
    assert_ok(tf_graph_launch(rt, g));
    assert_ok(tf_workspace_retire(rt, NULL, count_release, &c));
    assert_ok(tf_workspace_poll(rt));
    assert_int_equal(c.released, 0);
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(c.released, 1);
    expect_words(rt, d, 9, 4);
    assert_ok(tf_graph_release(g));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* ---- ordering with other slots and events ----------------------------------------- */

/* tf_slot_wait inside a capture: each launch waits for the work queued on
 * the other slot before the launch.  A slot that waits for a capturing slot
 * waits for its work queued before the capture, and the capture is
 * untouched. */
static void slot_waits_in_and_for_a_capture(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL, *s1 = NULL;
    struct kernels k = load_kernels(rt);
    uint64_t x = dev_alloc(rt, 64), y = dev_alloc(rt, 64);
    tf_graph *g = NULL;
    long before;
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_bind_slot(rt, 1, &s1));
    fill_words(s1, x, 0, 16);
    fill_words(s0, y, 0, 16);
    assert_ok(fill(s1, &k, x, 1, 16)); /* queued on slot 1, not run */
    assert_ok(tf_graph_capture_begin(s0));
    assert_ok(tf_slot_wait(s0, 1));
    assert_ok(tf_copy(s0, x, y, 64));
    g = end_capture(s0);
    assert_ok(fill(s1, &k, x, 2, 16)); /* after the capture, before the launch */
    assert_ok(tf_graph_launch(s0, g));
    assert_ok(tf_runtime_sync(s0)); /* runs slot 1 up to the launch's wait */
    expect_words(s0, y, 2, 16);
    /* slot 0 waits for capturing slot 1 */
    assert_ok(fill(s1, &k, x, 3, 16));
    assert_ok(tf_graph_capture_begin(s1));
    assert_ok(fill(s1, &k, x, 4, 16));
    before = nodes(s1);
    assert_ok(tf_slot_wait(s0, 1));
    assert_ok(tf_copy(s0, x, y, 64));
    assert_failure(tf_graph_launch(s0, g), TF_ERROR_RUNTIME_STATE, "tf_graph_launch",
                   "waits for slot 1, which is capturing a graph now");
    assert_int_equal(nodes(s1), before);
    assert_ok(tf_runtime_sync(s0));
    expect_words(s0, y, 3, 16); /* the work before the capture, not the captured */
    assert_int_equal(capture_status(s1), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_ok(tf_graph_capture_abort(s1));
    assert_ok(tf_graph_release(g));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, x), dev_free(rt, y);
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(s1));
    assert_ok(tf_runtime_release(rt));
}

/* Both slots capture: a wait between them is refused. */
static void slots_that_both_capture_do_not_wait(void **state) {
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL, *s1 = NULL;
    (void)state;
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_bind_slot(rt, 1, &s1));
    slot_stream(s1);
    assert_ok(tf_graph_capture_begin(s0));
    assert_ok(tf_graph_capture_begin(s1));
    assert_failure(tf_slot_wait(s0, 1), TF_ERROR_RUNTIME_STATE, "tf_slot_wait",
                   "slots 0 and 1 both capture a graph");
    assert_ok(tf_graph_capture_abort(s0));
    assert_ok(tf_graph_capture_abort(s1));
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(s1));
    assert_ok(tf_runtime_release(rt));
}

/* tf_event_wait inside a capture: each launch waits for the event's latest
 * record before the launch; tf_event_record: each launch records it.  The
 * graph holds its events: released by the caller, they live as long as it. */
static void event_nodes_hold_their_events(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL, *s1 = NULL;
    struct kernels k = load_kernels(rt);
    uint64_t x = dev_alloc(rt, 64), y = dev_alloc(rt, 64);
    tf_event *ready = NULL, *done = NULL;
    tf_graph *g = NULL;
    long events;
    int32_t finished = -1;
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_bind_slot(rt, 1, &s1));
    assert_ok(tf_event_new(rt, &ready));
    assert_ok(tf_event_new(rt, &done));
    fill_words(s0, y, 0, 16);
    slot_stream(s1);
    assert_ok(tf_graph_capture_begin(s0));
    assert_ok(tf_event_wait(s0, ready));
    assert_ok(tf_copy(s0, x, y, 64));
    assert_ok(tf_event_record(s0, done));
    g = end_capture(s0);
    assert_ok(fill(s1, &k, x, 7, 16)); /* queued on slot 1, not run */
    assert_ok(tf_event_record(s1, ready));
    assert_ok(tf_graph_launch(s0, g));
    assert_ok(tf_event_query(done, &finished));
    assert_int_equal(finished, 0);         /* the launch recorded it; not run yet */
    assert_ok(tf_event_synchronize(done)); /* runs slot 1 up to `ready` first */
    expect_words(s0, y, 7, 16);
    events = live(TFD_EVENTS);
    assert_ok(tf_event_release(ready)); /* the graph holds both */
    assert_ok(tf_event_release(done));
    assert_int_equal(live(TFD_EVENTS), events);
    assert_ok(tf_graph_launch(s0, g));
    assert_ok(tf_runtime_sync(s0));
    assert_ok(tf_graph_release(g));
    assert_int_equal(live(TFD_EVENTS), events - 2);
    assert_ok(tf_runtime_sync(s1));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, x), dev_free(rt, y);
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(s1));
    assert_ok(tf_runtime_release(rt));
}

/* ---- graphs across threads, fork, teardown ------------------------------------- */

struct launcher {
    tf_runtime *bound;
    tf_graph *graph;
    int launches;
    tf_status st;
};

static void *launch_many(void *arg) {
    struct launcher *l = arg;
    int i;
    l->st = TF_OK;
    for (i = 0; i < l->launches && l->st == TF_OK; ++i) l->st = tf_graph_launch(l->bound, l->graph);
    if (l->st == TF_OK) l->st = tf_runtime_sync(l->bound);
    return NULL;
}

static void *release_graph(void *arg) {
    struct launcher *l = arg;
    l->st = tf_graph_release(l->graph);
    return NULL;
}

/* One graph launched from four threads on four slots at once, its last
 * reference dropped on yet another thread: every launch runs, nothing is
 * left behind. */
static void graphs_are_shared_across_threads(void **state) {
    enum { THREADS = 4 };
    tf_runtime *rt = new_runtime_with_slots(THREADS);
    struct kernels k = load_kernels(rt);
    const uint32_t n = 256;
    uint64_t x = dev_alloc(rt, n * 4), y = dev_alloc(rt, n * 4), sum = dev_alloc(rt, n * 4);
    float *hx = floats(n, 1), *hy = floats(n, 2), *got = malloc(n * 4);
    struct launcher l[THREADS], last;
    pthread_t t[THREADS], r;
    tf_graph *g = NULL;
    uint32_t i;
    (void)state;
    dev_upload(rt, x, hx, n * 4);
    dev_upload(rt, y, hy, n * 4);
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(add(rt, &k, x, y, sum, n));
    g = end_capture(rt);
    for (i = 0; i < THREADS; ++i) {
        assert_ok(tf_runtime_bind_slot(rt, (int32_t)i, &l[i].bound));
        l[i].graph = g;
        l[i].launches = 50;
        assert_ok(tf_graph_retain(g));
        assert_int_equal(pthread_create(&t[i], NULL, launch_many, &l[i]), 0);
    }
    assert_ok(tf_graph_release(g)); /* the threads hold it now */
    for (i = 0; i < THREADS; ++i) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_ok(l[i].st);
    }
    for (i = 0; i + 1 < THREADS; ++i) assert_ok(tf_graph_release(l[i].graph));
    last.graph = l[THREADS - 1].graph;
    assert_int_equal(pthread_create(&r, NULL, release_graph, &last), 0);
    assert_int_equal(pthread_join(r, NULL), 0);
    assert_ok(last.st);
    assert_failure(tf_graph_retain(g), TF_ERROR_INVALID_HANDLE, "tf_graph_retain",
                   "was already released");
    dev_download(rt, got, sum, n * 4);
    for (i = 0; i < n; ++i) assert_true(got[i] == hx[i] + hy[i]);
    for (i = 0; i < THREADS; ++i) assert_ok(tf_runtime_release(l[i].bound));
    if (tfd()) assert_int_equal(live(TFD_GRAPH_EXECS), 0);
    assert_ok(tf_module_release(k.module));
    dev_free(rt, x), dev_free(rt, y), dev_free(rt, sum);
    free(hx), free(hy), free(got);
    assert_ok(tf_runtime_release(rt));
}

#define CHILD_CHECK(cond)                       \
    do {                                        \
        if (!(cond)) _exit(__LINE__ % 200 + 1); \
    } while (0)

/* In a forked child every graph call on the parent's runtime refuses with
 * TF_ERROR_RUNTIME_STATE and touches no driver; retain and release work. */
static void forked_child_refuses_graphs(void **state) {
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64);
    tf_graph *g = fill_graph(rt, &k, d, 1, 4), *other = NULL;
    int32_t flag = 0;
    int status = -1;
    pid_t pid;
    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (tfd()) tfd()->tfd_log_clear();
        CHILD_CHECK(tf_graph_launch(rt, g) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(strstr(tf_last_error_message(), "fork") != NULL);
        CHILD_CHECK(tf_graph_capture_begin(rt) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(tf_graph_capture_end(rt, &other) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(tf_graph_capture_update(rt, g, &flag) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(tf_graph_capture_abort(rt) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(tf_graph_retain(g) == TF_OK);
        CHILD_CHECK(tf_graph_release(g) == TF_OK);
        CHILD_CHECK(tf_graph_release(g) == TF_OK); /* the last: leaks quietly */
        if (tfd()) CHILD_CHECK(tfd()->tfd_log_count() == 0);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_ok(tf_graph_launch(rt, g)); /* the parent's graph still works */
    expect_words(rt, d, 1, 4);
    assert_ok(tf_graph_release(g));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* A capture still open at the runtime's last release is dropped, logged;
 * nothing is left behind. */
static void last_release_drops_an_open_capture(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64);
    const char *log;
    assert_ok(fill(rt, &k, d, 1, 4));
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(fill(rt, &k, d, 2, 4));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    log = log_capture_stop();
    assert_non_null(strstr(log,
                           "tf_runtime_release: slot 0 was still capturing a graph; the "
                           "capture is discarded"));
    assert_int_equal(live(TFD_GRAPHS) + live(TFD_GRAPH_EXECS), 0);
}

/* ---- bad input and the remaining driver failures -------------------------------- */

static void bad_arguments_are_refused(void **state) {
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64);
    tf_graph *g = NULL;
    uint64_t not_a_graph[8] = {0};
    int32_t flag = -1;
    (void)state;
    assert_failure(tf_graph_capture_begin(NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_capture_begin", "runtime handle is NULL");
    assert_failure(tf_graph_capture_end(NULL, &g), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_capture_end", "runtime handle is NULL");
    assert_failure(tf_graph_capture_update(NULL, g, &flag), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_capture_update", "runtime handle is NULL");
    assert_failure(tf_graph_capture_abort(NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_capture_abort", "runtime handle is NULL");
    assert_failure(tf_graph_launch(NULL, g), TF_ERROR_INVALID_ARGUMENT, "tf_graph_launch",
                   "runtime handle is NULL");
    assert_ok(tf_graph_capture_begin(rt));
    assert_failure(tf_graph_capture_end(rt, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_capture_end", "out is NULL");
    assert_failure(tf_graph_capture_update(rt, NULL, &flag), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_capture_update", "graph is NULL");
    assert_failure(tf_graph_capture_update(rt, (tf_graph *)not_a_graph, &flag),
                   TF_ERROR_INVALID_ARGUMENT, "tf_graph_capture_update", "is not a live graph");
    assert_int_equal(flag, -1);
    assert_int_equal(capture_status(rt), CU_STREAM_CAPTURE_STATUS_ACTIVE); /* still open */
    assert_ok(fill(rt, &k, d, 3, 4));
    g = end_capture(rt);
    assert_failure(tf_graph_launch(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_graph_launch",
                   "graph is NULL");
    assert_failure(tf_graph_launch(rt, (tf_graph *)not_a_graph), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_launch", "is not a live graph");
    assert_failure(tf_graph_retain(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_graph_retain",
                   "graph is NULL");
    assert_failure(tf_graph_retain((tf_graph *)not_a_graph), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_retain", "is not a live graph");
    assert_failure(tf_graph_release((tf_graph *)not_a_graph), TF_ERROR_INVALID_ARGUMENT,
                   "tf_graph_release", "is not a live graph");
    assert_ok(tf_graph_release(NULL));
    assert_ok(tf_graph_release(g));
    assert_failure(tf_graph_launch(rt, g), TF_ERROR_INVALID_HANDLE, "tf_graph_launch",
                   "was already released");
    assert_failure(tf_graph_release(g), TF_ERROR_INVALID_HANDLE, "tf_graph_release",
                   "was already released");
    assert_failure(tf_graph_capture_update(rt, g, &flag), TF_ERROR_INVALID_HANDLE,
                   "tf_graph_capture_update", "was already released");
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* The driver failures left: an event record node, a launch, the destroy of
 * a captured graph and of an executable one, a capture query. */
static void driver_failures_of_launch_events_and_destroys(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t d = dev_alloc(rt, 64);
    tf_event *ev = NULL;
    tf_graph *g = NULL;
    const char *log;
    unsigned long pending;
    assert_ok(tf_event_new(rt, &ev));
    assert_ok(tf_graph_capture_begin(rt));
    INJECT("cuEventRecordWithFlags", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_event_record(rt, ev), TF_ERROR_CUDA, "tf_event_record",
                   "cuEventRecordWithFlags failed");
    assert_ok(tf_event_synchronize(ev)); /* its record is not in the capture */
    assert_ok(fill(rt, &k, d, 2, 4));
    INJECT("cuGraphDestroy", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    g = end_capture(rt);
    log = log_capture_stop();
    assert_non_null(strstr(log, "cuGraphDestroy of the captured graph failed"));
    assert_int_equal(live(TFD_GRAPHS), 1); /* leaked, as logged: it goes with the context */
    pending = tfd()->tfd_pending(slot_stream(rt));
    INJECT("cuGraphLaunch", 1, CUDA_ERROR_INVALID_VALUE, 1);
    assert_failure(tf_graph_launch(rt, g), TF_ERROR_CUDA, "tf_graph_launch",
                   "cuGraphLaunch failed");
    assert_int_equal(tfd()->tfd_pending(slot_stream(rt)), pending); /* nothing queued */
    /* a capture query that fails counts as no capture: the call goes on */
    INJECT("cuStreamIsCapturing", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(tf_last_error_status(), TF_ERROR_CUDA); /* still the launch's */
    assert_ok(tf_graph_launch(rt, g));
    expect_words(rt, d, 2, 4);
    INJECT("cuGraphExecDestroy", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_ok(tf_graph_release(g));
    log = log_capture_stop();
    assert_non_null(strstr(log, "tf_graph_release: cuGraphExecDestroy failed"));
    assert_int_equal(live(TFD_GRAPH_EXECS), 1);
    assert_ok(tf_event_release(ev));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, d);
    assert_ok(tf_runtime_release(rt));
}

/* ---- on a GPU as on the double -------------------------------------------------- */

/* Work captured and launched writes exactly the bytes the same work writes
 * uncaptured: kernels, a device copy and copies through page-locked memory,
 * over 4 MiB. */
static void captured_work_is_byte_exact(void **state) {
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    const uint32_t n = 1 << 20;
    const size_t bytes = (size_t)n * 4;
    uint64_t x = dev_alloc(rt, bytes), y = dev_alloc(rt, bytes), out = dev_alloc(rt, bytes),
             copy = dev_alloc(rt, bytes);
    void *pinned_x = NULL, *pinned_out = NULL;
    unsigned char *direct = malloc(bytes), *replayed = malloc(bytes);
    float *hx = floats(n, -3), *hy = floats(n, 0.5f);
    tf_graph *g = NULL;
    int run;
    (void)state;
    assert_ok(tf_host_alloc(rt, bytes, &pinned_x));
    assert_ok(tf_host_alloc(rt, bytes, &pinned_out));
    memcpy(pinned_x, hx, bytes);
    dev_upload(rt, y, hy, bytes);
    for (run = 0; run < 2; ++run) {
        if (run == 1) assert_ok(tf_graph_capture_begin(rt));
        assert_ok(tf_upload_async(rt, pinned_x, x, bytes));
        assert_ok(add(rt, &k, x, y, out, n));
        assert_ok(fill(rt, &k, out, 0x3f800000u, 1000)); /* 1.0f over the first 1000 */
        assert_ok(tf_copy(rt, out, copy, bytes));
        assert_ok(add(rt, &k, copy, x, copy, n));
        assert_ok(tf_download_async(rt, copy, pinned_out, bytes));
        if (run == 1) {
            g = end_capture(rt);
            memset(pinned_out, 0, bytes);
            assert_ok(tf_graph_launch(rt, g));
        }
        assert_ok(tf_runtime_sync(rt));
        memcpy(run == 0 ? direct : replayed, pinned_out, bytes);
    }
    assert_memory_equal(direct, replayed, bytes);
    assert_ok(tf_graph_release(g));
    assert_ok(tf_host_free(rt, pinned_x));
    assert_ok(tf_host_free(rt, pinned_out));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, x), dev_free(rt, y), dev_free(rt, out), dev_free(rt, copy);
    free(direct), free(replayed), free(hx), free(hy);
    assert_ok(tf_runtime_release(rt));
}

/* Scalar reads right after launches, on a slot whose idle streak was long:
 * each sees its launch's result (on a GPU too, where the paths differ in
 * speed only). */
static void scalar_reads_after_launches_on_a_long_idle_slot(void **state) {
    tf_runtime *rt = new_runtime();
    struct kernels k = load_kernels(rt);
    uint64_t src = dev_alloc(rt, 64), dst = dev_alloc(rt, 64);
    uint32_t word = 0, i, r;
    tf_graph *g = NULL;
    (void)state;
    fill_words(rt, src, 0, 16);
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(tf_copy(rt, src, dst, 64));
    assert_ok(add(rt, &k, dst, dst, dst, 16)); /* 2x, as floats */
    g = end_capture(rt);
    for (i = 1; i <= 40; ++i) {
        const float value = (float)i;
        float got = 0;
        for (r = 0; r < 20; ++r) assert_ok(tf_download_scalar(rt, src, &word, 4)); /* idle */
        assert_ok(tf_upload(rt, &value, src, 4));
        assert_ok(tf_graph_launch(rt, g));
        assert_ok(tf_download_scalar(rt, dst, &got, 4));
        if (got != 2 * value) fail_msg("launch %u: read %g, want %g", i, got, 2 * value);
    }
    assert_ok(tf_graph_release(g));
    assert_ok(tf_module_release(k.module));
    dev_free(rt, src), dev_free(rt, dst);
    assert_ok(tf_runtime_release(rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(capture_begun_by_hand_is_refused_and_left_intact),
        TF_TEST(queue_only_calls_are_captured_and_run_at_each_launch),
        TF_TEST(cublas_work_is_captured),
        TF_TEST(waiting_calls_are_refused_and_the_capture_stays_intact),
        TF_TEST(other_slots_are_not_affected),
        TF_TEST(failed_captures_leave_the_slot_usable),
        TF_TEST(failed_end_keeps_the_capture_open),
        TF_TEST(capture_belongs_to_its_slot),
        TF_TEST(update_in_place_or_anew),
        TF_TEST(failed_updates_keep_the_earlier_graph),
        TF_TEST(scalar_read_after_a_launch_asks_the_stream),
        TF_TEST(page_locked_block_waits_for_the_launch),
        TF_TEST(launch_refuses_page_locked_memory_freed_after_the_capture),
        TF_TEST(page_locked_memory_used_before_the_capture),
        TF_TEST(retirement_waits_for_the_launch),
        TF_TEST(slot_waits_in_and_for_a_capture),
        TF_TEST(slots_that_both_capture_do_not_wait),
        TF_TEST(event_nodes_hold_their_events),
        TF_TEST(graphs_are_shared_across_threads),
        TF_TEST(forked_child_refuses_graphs),
        TF_TEST(last_release_drops_an_open_capture),
        TF_TEST(bad_arguments_are_refused),
        TF_TEST(driver_failures_of_launch_events_and_destroys),
        TF_TEST(captured_work_is_byte_exact),
        TF_TEST(scalar_reads_after_launches_on_a_long_idle_slot),
    };
    return cmocka_run_group_tests_name("graph", tests, NULL, NULL);
}
