/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tf_alloc and tf_free inside a graph capture: the graph's allocation and
 * free nodes.  A temporary allocated, used and freed in the capture replays
 * byte-exact at every launch; an allocation left unfreed refuses the end,
 * nothing kept; a free of memory from outside the capture is refused; the
 * graph's addresses are refused outside it; failures of the driver's
 * allocation and free inside a capture leave it going; updates of graphs
 * with memory nodes instantiate anew; fork and teardown.  The last test
 * checks the driver's own rule for an allocation a graph leaves allocated
 * (the double models it).  Every test that injects nothing also runs on a
 * GPU. */
#include <cudaTypedefs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/kernels.h"
#include "support/raw_memory.h"
#include "support/test_support.h"
#include "support/transfer_support.h"

#define N 4096u /* floats per vector */
/* In a forked child: exit with a code naming the line that failed. */
#define CHILD_OK(cond)                          \
    do {                                        \
        if (!(cond)) _exit(__LINE__ % 200 + 1); \
    } while (0)
#define BYTES (N * sizeof(float))
/* A raw driver entry point into the function pointer `var`. */
#define LOAD_ENTRY(var, name, version)                   \
    do {                                                 \
        void *fn_ = raw_driver_entry((name), (version)); \
        assert_non_null(fn_);                            \
        memcpy(&(var), &fn_, sizeof fn_);                \
    } while (0)

struct body {
    tf_module *module;
    void *add;
    uint64_t x, y, out;
};

static struct body body_new(tf_runtime *rt) {
    struct body b;
    assert_ok(tf_module_load(rt, kTestKernelsPtx, sizeof kTestKernelsPtx, &b.module));
    assert_ok(tf_module_function(b.module, "tfd_add_f32", &b.add));
    b.x = dev_alloc(rt, BYTES), b.y = dev_alloc(rt, BYTES), b.out = dev_alloc(rt, BYTES);
    return b;
}

static void body_free(tf_runtime *rt, struct body *b) {
    dev_free(rt, b->x), dev_free(rt, b->y), dev_free(rt, b->out);
    assert_ok(tf_module_release(b->module));
}

/* out = x + y on the slot of rt. */
static tf_status add_into(tf_runtime *rt, const struct body *b, uint64_t x, uint64_t y,
                          uint64_t out) {
    tf_launch_config c;
    uint32_t n = N;
    void *args[4] = {&x, &y, &out, &n};
    tf_launch_config_init(&c, sizeof c);
    c.block_x = 256;
    c.grid_x = N / 256;
    return tf_kernel_launch(rt, b->add, &c, args);
}

/* The captured body: tmp = x + y; out = tmp + y; tmp freed. *tmp_out: tmp. */
static void capture_temporary(tf_runtime *rt, const struct body *b, uint64_t *tmp_out) {
    uint64_t tmp = 0;
    assert_ok(tf_alloc(rt, BYTES, &tmp));
    assert_true(tmp != 0);
    assert_ok(add_into(rt, b, b->x, b->y, tmp));
    assert_ok(add_into(rt, b, tmp, b->y, b->out));
    assert_ok(tf_free(rt, tmp));
    if (tmp_out) *tmp_out = tmp;
}

static void upload_floats(tf_runtime *rt, uint64_t d, float base) {
    float h[N];
    for (unsigned i = 0; i < N; ++i) h[i] = base + (float)i * 0.375f;
    dev_upload(rt, d, h, BYTES);
}

static tf_memory_pool_stats stats(tf_runtime *rt) {
    tf_memory_pool_stats s;
    tf_memory_pool_stats_init(&s, sizeof s);
    assert_ok(tf_memory_stats(rt, &s));
    return s;
}

static long live_allocs(void) { return tfd() ? tfd()->tfd_live(TFD_DEVICE_ALLOCS) : 0; }

/* Captured alloc + kernels + free replays what the same calls compute
 * uncaptured, bit for bit, at every launch on new inputs; the pool's
 * counters do not see graph memory; the graph's address is refused
 * outside its capture. */
static void temporary_replays_byte_exact(void **state) {
    tf_runtime *rt = new_runtime();
    struct body b = body_new(rt);
    uint64_t tmp = 0, direct_tmp = lib_alloc(rt, BYTES), direct = dev_alloc(rt, BYTES);
    unsigned char want[BYTES], got[BYTES];
    tf_memory_pool_stats before, after;
    tf_graph *g = NULL;
    (void)state;
    upload_floats(rt, b.y, 0.5f);
    before = stats(rt);
    assert_ok(tf_graph_capture_begin(rt));
    capture_temporary(rt, &b, &tmp);
    assert_ok(tf_graph_capture_end(rt, &g));
    after = stats(rt);
    assert_int_equal(after.in_use_bytes, before.in_use_bytes);
    assert_int_equal(after.allocations, before.allocations);
    assert_int_equal(after.frees, before.frees);
    for (int run = 0; run < 3; ++run) {
        upload_floats(rt, b.x, -7.0f + (float)run * 1.25f);
        assert_ok(add_into(rt, &b, b.x, b.y, direct_tmp));
        assert_ok(add_into(rt, &b, direct_tmp, b.y, direct));
        assert_ok(tf_graph_launch(rt, g));
        dev_download(rt, want, direct, BYTES);
        dev_download(rt, got, b.out, BYTES);
        assert_memory_equal(got, want, BYTES);
    }
    assert_failure(tf_copy(rt, tmp, direct, 64), TF_ERROR_INVALID_ARGUMENT, "tf_copy",
                   "is memory of a graph", "no work outside that graph can use it");
    assert_failure(tf_memory_record_use(rt, tmp + 8), TF_ERROR_INVALID_ARGUMENT,
                   "tf_memory_record_use", "is memory of a graph");
    assert_failure(tf_free(rt, tmp), TF_ERROR_INVALID_ARGUMENT, "tf_free", "is memory of a graph",
                   "tf_free outside its capture does not");
    assert_ok(tf_graph_release(g));
    lib_free(rt, direct_tmp);
    dev_free(rt, direct);
    body_free(rt, &b);
    assert_ok(tf_runtime_release(rt));
}

/* An allocation of the capture not freed in it: the end refuses, names it,
 * keeps nothing; the slot captures and runs again. */
static void unfreed_allocation_refuses_the_end(void **state) {
    tf_runtime *rt = new_runtime();
    struct body b = body_new(rt);
    uint64_t kept = 0, freed = 0;
    const long allocs = live_allocs();
    tf_graph *g = NULL, *earlier = NULL;
    int32_t in_place = 7;
    char want[64];
    (void)state;
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(tf_alloc(rt, 256, &freed));
    assert_ok(tf_alloc(rt, 4096, &kept));
    assert_ok(add_into(rt, &b, b.x, b.y, b.out));
    assert_ok(tf_free(rt, freed));
    snprintf(want, sizeof want, "4096 bytes at 0x%llx", (unsigned long long)kept);
    assert_failure(tf_graph_capture_end(rt, &g), TF_ERROR_RUNTIME_STATE, "tf_graph_capture_end",
                   "1 allocation of 4096 bytes made in the capture was not freed in it", want,
                   "nothing was kept and the slot works as before");
    assert_null(g);
    assert_int_equal(live_allocs(), allocs);
    assert_ok(tf_runtime_sync(rt));
    assert_ok(tf_graph_capture_begin(rt));
    capture_temporary(rt, &b, NULL);
    assert_ok(tf_graph_capture_end(rt, &earlier));
    /* An update that leaves memory unfreed: the graph keeps its earlier work. */
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(tf_alloc(rt, 64, &kept));
    assert_failure(tf_graph_capture_update(rt, earlier, &in_place), TF_ERROR_RUNTIME_STATE,
                   "tf_graph_capture_update", "1 allocation of 64 bytes");
    assert_int_equal(in_place, 7);
    upload_floats(rt, b.x, 1.0f), upload_floats(rt, b.y, 2.0f);
    assert_ok(tf_graph_launch(rt, earlier));
    {
        float h[N];
        dev_download(rt, h, b.out, BYTES);
        assert_true(h[3] == (1.0f + 3 * 0.375f) + 2 * (2.0f + 3 * 0.375f));
    }
    assert_ok(tf_graph_release(earlier));
    body_free(rt, &b);
    assert_ok(tf_runtime_release(rt));
}

/* Frees inside a capture that cannot be free nodes are refused, and the
 * capture goes on. */
static void frees_that_cannot_be_captured(void **state) {
    tf_runtime *rt = new_runtime();
    struct body b = body_new(rt);
    uint64_t outside = lib_alloc(rt, 64), tmp = 0, other_tmp = 0;
    tf_graph *other = NULL, *g = NULL;
    (void)state;
    assert_ok(tf_graph_capture_begin(rt));
    capture_temporary(rt, &b, &other_tmp);
    assert_ok(tf_graph_capture_end(rt, &other));
    assert_ok(tf_graph_capture_begin(rt));
    assert_failure(tf_free(rt, outside), TF_ERROR_RUNTIME_STATE, "tf_free",
                   "was not allocated in this capture", "free it after the capture ends");
    assert_failure(tf_free(rt, other_tmp), TF_ERROR_INVALID_ARGUMENT, "tf_free",
                   "is memory of a graph", "another capture's graph frees it");
    assert_ok(tf_alloc(rt, 64, &tmp));
    assert_ok(tf_copy(rt, b.x, tmp, 64)); /* inside its capture: usable */
    assert_failure(tf_copy(rt, b.x, tmp, 65), TF_ERROR_INVALID_ARGUMENT, "tf_copy",
                   "crosses the end of its allocation");
    assert_ok(tf_free(rt, tmp));
    assert_failure(tf_free(rt, tmp), TF_ERROR_INVALID_ARGUMENT, "tf_free",
                   "already freed in this capture");
    assert_ok(tf_graph_capture_end(rt, &g));
    assert_ok(tf_graph_launch(rt, g));
    assert_ok(tf_graph_launch(rt, other));
    assert_ok(tf_runtime_sync(rt));
    assert_ok(tf_graph_release(g));
    assert_ok(tf_graph_release(other));
    lib_free(rt, outside); /* still the pool's: the refused free did nothing */
    body_free(rt, &b);
    assert_ok(tf_runtime_release(rt));
}

/* The driver refuses the allocation or the free node: the call fails, the
 * capture goes on; without memory pools tf_alloc in a capture is not
 * supported. */
static void failed_allocation_and_free_in_a_capture(void **state) {
    tf_runtime *rt = NULL;
    struct body b;
    uint64_t p = 99, tmp = 0;
    tf_graph *g = NULL;
    (void)state;
    REQUIRE_DOUBLE();
    rt = new_runtime();
    b = body_new(rt);
    assert_ok(tf_graph_capture_begin(rt));
    INJECT("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_alloc(rt, 64, &p), TF_ERROR_OUT_OF_MEMORY, "tf_alloc",
                   "cuMemAllocFromPoolAsync", "nothing was added to the capture, which goes on");
    assert_int_equal(p, 99);
    assert_int_equal(tfd()->tfd_calls("cuStreamSynchronize"), 0); /* no retry in a capture */
    assert_ok(tf_alloc(rt, 64, &tmp));
    INJECT("cuMemFreeAsync", 1, CUDA_ERROR_INVALID_VALUE, 1);
    assert_failure(tf_free(rt, tmp), TF_ERROR_CUDA, "tf_free", "cuMemFreeAsync");
    assert_ok(tf_free(rt, tmp)); /* still the capture's, unfreed: freed now */
    assert_ok(tf_graph_capture_end(rt, &g));
    assert_ok(tf_graph_launch(rt, g));
    assert_ok(tf_runtime_sync(rt));
    assert_ok(tf_graph_release(g));
    body_free(rt, &b);
    assert_ok(tf_runtime_release(rt));
    tfd()->tfd_set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
    rt = new_runtime();
    assert_ok(tf_graph_capture_begin(rt));
    assert_failure(tf_alloc(rt, 64, &p), TF_ERROR_NOT_SUPPORTED, "tf_alloc",
                   "allocates without a memory pool", "allocate before tf_graph_capture_begin");
    assert_ok(tf_graph_capture_end(rt, &g));
    assert_ok(tf_graph_release(g));
    assert_ok(tf_runtime_release(rt));
}

/* Memory nodes cannot change in an update: a capture with (or into a graph
 * with) allocations is instantiated anew, and runs its new work. */
static void updates_with_memory_nodes_instantiate_anew(void **state) {
    tf_runtime *rt = new_runtime();
    struct body b = body_new(rt);
    tf_graph *g = NULL;
    int32_t in_place = -1;
    unsigned long updates = tfd() ? tfd()->tfd_calls("cuGraphExecUpdate") : 0;
    float h[N];
    (void)state;
    upload_floats(rt, b.x, 3.0f), upload_floats(rt, b.y, -1.0f);
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(add_into(rt, &b, b.x, b.y, b.out));
    assert_ok(tf_graph_capture_end(rt, &g));
    for (int step = 0; step < 2; ++step) {
        assert_ok(tf_graph_capture_begin(rt));
        capture_temporary(rt, &b, NULL);
        assert_ok(tf_graph_capture_update(rt, g, &in_place));
        assert_int_equal(in_place, 0);
    }
    assert_ok(tf_graph_launch(rt, g));
    dev_download(rt, h, b.out, BYTES);
    assert_true(h[5] == (3.0f + 5 * 0.375f) + 2 * (-1.0f + 5 * 0.375f));
    if (tfd()) assert_int_equal(tfd()->tfd_calls("cuGraphExecUpdate"), updates);
    assert_ok(tf_graph_capture_begin(rt)); /* back to no memory nodes: anew too */
    assert_ok(add_into(rt, &b, b.x, b.y, b.out));
    assert_ok(tf_graph_capture_update(rt, g, &in_place));
    assert_int_equal(in_place, 0);
    assert_ok(tf_graph_launch(rt, g));
    dev_download(rt, h, b.out, BYTES);
    assert_true(h[5] == (3.0f + 5 * 0.375f) + (-1.0f + 5 * 0.375f));
    assert_ok(tf_graph_release(g));
    body_free(rt, &b);
    assert_ok(tf_runtime_release(rt));
}

/* In a forked child the parent's graph with memory nodes refuses, and its
 * capture calls too; the parent's graph still runs. */
static void forked_child_refuses_graph_memory(void **state) {
    tf_runtime *rt = new_runtime();
    struct body b = body_new(rt);
    tf_graph *g = NULL;
    uint64_t p = 0;
    int status = -1;
    pid_t pid;
    (void)state;
    assert_ok(tf_graph_capture_begin(rt));
    capture_temporary(rt, &b, NULL);
    assert_ok(tf_graph_capture_end(rt, &g));
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        CHILD_OK(tf_graph_launch(rt, g) == TF_ERROR_RUNTIME_STATE);
        CHILD_OK(tf_alloc(rt, 64, &p) == TF_ERROR_RUNTIME_STATE);
        CHILD_OK(tf_graph_release(g) == TF_OK);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_ok(tf_graph_launch(rt, g));
    assert_ok(tf_runtime_sync(rt));
    assert_ok(tf_graph_release(g));
    body_free(rt, &b);
    assert_ok(tf_runtime_release(rt));
}

/* A graph with memory nodes outlives its runtime's handle and still runs
 * through another; an open capture holding an allocation is dropped at the
 * last release; nothing is left (the fixture checks the double's counts). */
static void teardown_with_graph_memory(void **state) {
    tf_runtime *rt = new_runtime(), *bound = NULL;
    struct body b = body_new(rt);
    tf_graph *g = NULL;
    uint64_t tmp = 0;
    (void)state;
    assert_ok(tf_runtime_bind_slot(rt, 0, &bound));
    assert_ok(tf_graph_capture_begin(rt));
    capture_temporary(rt, &b, NULL);
    assert_ok(tf_graph_capture_end(rt, &g));
    assert_ok(tf_runtime_release(rt));
    assert_ok(tf_graph_launch(bound, g));
    assert_ok(tf_runtime_sync(bound));
    body_free(bound, &b);
    assert_ok(tf_graph_capture_begin(bound));
    assert_ok(tf_alloc(bound, 128, &tmp));
    assert_ok(tf_graph_release(g)); /* the runtime lives on in `bound` */
    log_capture_start();
    assert_ok(tf_runtime_release(bound));
    assert_non_null(strstr(log_capture_stop(), "was still capturing a graph"));
}

/* The driver's rule for an allocation a graph leaves allocated: a second
 * launch before it is freed fails, unless instantiated to free it at each
 * launch.  Raw driver calls on a stream of the library's runtime. */
static void driver_refuses_a_launch_over_live_graph_memory(void **state) {
    tf_runtime *rt = new_runtime();
    PFN_cuStreamBeginCapture_v10010 begin;
    PFN_cuStreamEndCapture_v10000 end;
    PFN_cuGraphInstantiateWithFlags_v11040 instantiate;
    PFN_cuGraphLaunch_v10000 launch;
    PFN_cuGraphExecDestroy_v10000 exec_destroy;
    PFN_cuGraphDestroy_v10000 destroy;
    PFN_cuDeviceGetDefaultMemPool_v11020 default_pool;
    PFN_cuMemAllocFromPoolAsync_v11020 alloc;
    PFN_cuMemFreeAsync_v11020 free_async;
    PFN_cuStreamSynchronize_v2000 sync;
    void *stream = NULL, *ctx = NULL, *saved = raw_current_context();
    CUmemoryPool pool = NULL;
    CUdeviceptr p = 0;
    CUgraph graph = NULL;
    CUgraphExec once = NULL, auto_free = NULL;
    (void)state;
    LOAD_ENTRY(begin, "cuStreamBeginCapture", 10010);
    LOAD_ENTRY(end, "cuStreamEndCapture", 10000);
    LOAD_ENTRY(instantiate, "cuGraphInstantiateWithFlags", 11040);
    LOAD_ENTRY(launch, "cuGraphLaunch", 10000);
    LOAD_ENTRY(exec_destroy, "cuGraphExecDestroy", 10000);
    LOAD_ENTRY(destroy, "cuGraphDestroy", 10000);
    LOAD_ENTRY(default_pool, "cuDeviceGetDefaultMemPool", 11020);
    LOAD_ENTRY(alloc, "cuMemAllocFromPoolAsync", 11020);
    LOAD_ENTRY(free_async, "cuMemFreeAsync", 11020);
    LOAD_ENTRY(sync, "cuStreamSynchronize", 2000);
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_ok(tf_runtime_primary_context(rt, &ctx));
    raw_set_current_context(ctx);
    assert_int_equal(default_pool(&pool, 0), CUDA_SUCCESS);
    assert_int_equal(begin((CUstream)stream, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    assert_int_equal(alloc(&p, 4096, pool, (CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(end((CUstream)stream, &graph), CUDA_SUCCESS);
    assert_int_equal(instantiate(&once, graph, 0), CUDA_SUCCESS);
    assert_int_equal(launch(once, (CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(launch(once, (CUstream)stream), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(free_async(p, (CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(launch(once, (CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(free_async(p, (CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(sync((CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(exec_destroy(once), CUDA_SUCCESS);
    assert_int_equal(
        instantiate(&auto_free, graph, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH),
        CUDA_SUCCESS);
    assert_int_equal(launch(auto_free, (CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(launch(auto_free, (CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(free_async(p, (CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(sync((CUstream)stream), CUDA_SUCCESS);
    assert_int_equal(exec_destroy(auto_free), CUDA_SUCCESS);
    assert_int_equal(destroy(graph), CUDA_SUCCESS);
    raw_set_current_context(saved);
    assert_ok(tf_runtime_release(rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(temporary_replays_byte_exact),
        TF_TEST(unfreed_allocation_refuses_the_end),
        TF_TEST(frees_that_cannot_be_captured),
        TF_TEST(failed_allocation_and_free_in_a_capture),
        TF_TEST(updates_with_memory_nodes_instantiate_anew),
        TF_TEST(forked_child_refuses_graph_memory),
        TF_TEST(teardown_with_graph_memory),
        TF_TEST(driver_refuses_a_launch_over_live_graph_memory),
    };
    return cmocka_run_group_tests_name("graph_memory", tests, NULL, NULL);
}
