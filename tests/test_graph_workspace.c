/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* A graph whose captured cuBLAS or cuBLASLt work uses its capturing slot's
 * handle and workspace (NOTE [graph workspace] in src/README.md): launched
 * from another slot it runs after that slot's earlier work and before its
 * later work; on its own slot it costs no driver call; a graph without such
 * work adds nothing; a capture on its slot refuses the launch with nothing
 * queued; failures of the ordering's records and waits; launches from
 * enqueue callbacks, and updates of the graph racing its launches.  The GEMMs are 2x2 SGEMMs
 * (column-major) whose inputs are other GEMMs' outputs, so the order they ran in shows in the
 * floats, on the double's stream model as on a GPU. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "support/raw_memory.h"
#include "support/test_support.h"

typedef int32_t (*sgemm_fn)(void *, int, int, int, int, int, const float *, const float *, int,
                            const float *, int, const float *, float *, int);

/* c = a * b, 2x2. */
struct gemm {
    sgemm_fn sgemm;
    uint64_t a, b, c;
};

static int32_t gemm_call(void *handle, void *stream, void *user_data) {
    const struct gemm *g = user_data;
    const float one = 1.0f, zero = 0.0f;
    (void)stream;
    return g->sgemm(handle, 0, 0, 2, 2, 2, &one, (const float *)(uintptr_t)g->a, 2,
                    (const float *)(uintptr_t)g->b, 2, &zero, (float *)(uintptr_t)g->c, 2);
}

/* Two slots; slot 0 (s) captures, slot 1 (t) launches.  x = a1 * id is
 * slot 0's earlier GEMM, c = x * b the graph's, x = a2 * id slot 0's later
 * one: c is a1 * b exactly when the graph ran between them. */
struct fixture {
    tf_runtime *rt, *s, *t;
    uint64_t a1, a2, id, b, x, c;
    struct gemm before, captured, after;
    tf_graph *graph;
};

static const float kA1[4] = {1, 2, 3, 4}, kA2[4] = {9, 9, 9, 9}, kId[4] = {1, 0, 0, 1},
                   kB[4] = {5, 6, 7, 8}, kZero[4] = {0, 0, 0, 0};
/* a1 * b, column-major */
static const float kWant[4] = {23, 34, 31, 46};

static uint64_t upload4(tf_runtime *rt, const float *v) {
    uint64_t d = dev_alloc(rt, 16);
    dev_upload(rt, d, v, 16);
    return d;
}

static struct gemm gemm_of(sgemm_fn f, uint64_t a, uint64_t b, uint64_t c) {
    struct gemm g;
    g.sgemm = f, g.a = a, g.b = b, g.c = c;
    return g;
}

/* False (and nothing made) when the runtime has no cuBLAS. */
static int setup(struct fixture *f) {
    int32_t have = 0;
    void *fn = NULL;
    sgemm_fn sgemm;
    memset(f, 0, sizeof *f);
    f->rt = new_runtime_with_slots(2);
    assert_ok(tf_runtime_supports(f->rt, TF_CAP_CUBLAS, &have));
    if (!have) {
        assert_ok(tf_runtime_release(f->rt));
        return 0;
    }
    assert_ok(tf_runtime_bind_slot(f->rt, 0, &f->s));
    assert_ok(tf_runtime_bind_slot(f->rt, 1, &f->t));
    assert_ok(tf_cublas_symbol("cublasSgemm_v2", &fn));
    memcpy(&sgemm, &fn, sizeof fn);
    f->a1 = upload4(f->s, kA1), f->a2 = upload4(f->s, kA2), f->id = upload4(f->s, kId);
    f->b = upload4(f->s, kB), f->x = upload4(f->s, kZero), f->c = upload4(f->s, kZero);
    f->before = gemm_of(sgemm, f->a1, f->id, f->x);
    f->captured = gemm_of(sgemm, f->x, f->b, f->c);
    f->after = gemm_of(sgemm, f->a2, f->id, f->x);
    assert_ok(tf_graph_capture_begin(f->s));
    assert_ok(tf_cublas_enqueue(f->s, TF_CUBLAS_POINTER_MODE_HOST, gemm_call, &f->captured));
    assert_ok(tf_graph_capture_end(f->s, &f->graph));
    assert_ok(tf_runtime_sync(f->s));
    return 1;
}

static void teardown(struct fixture *f) {
    assert_ok(tf_graph_release(f->graph));
    dev_free(f->rt, f->a1), dev_free(f->rt, f->a2), dev_free(f->rt, f->id);
    dev_free(f->rt, f->b), dev_free(f->rt, f->x), dev_free(f->rt, f->c);
    assert_ok(tf_runtime_release(f->s));
    assert_ok(tf_runtime_release(f->t));
    assert_ok(tf_runtime_release(f->rt));
}

#define SETUP_OR_SKIP(f)       \
    do {                       \
        if (!setup(f)) skip(); \
    } while (0)

static void enqueue(tf_runtime *rt, struct gemm *g) {
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, gemm_call, g));
}

static void expect_c(struct fixture *f, const float *want) {
    float c[4];
    dev_download(f->s, c, f->c, 16);
    if (memcmp(c, want, sizeof c) != 0)
        fail_msg("c is {%g, %g, %g, %g}, want {%g, %g, %g, %g}", c[0], c[1], c[2], c[3], want[0],
                 want[1], want[2], want[3]);
}

/* Slot 0's earlier GEMM on fresh x and c. */
static void prepare(struct fixture *f) {
    dev_upload(f->s, f->x, kZero, 16);
    dev_upload(f->s, f->c, kZero, 16);
    enqueue(f->s, &f->before);
}

/* After the launch: slot 0's later GEMM, then the slots synchronized,
 * `first` first (deferred work runs only when a stream is made to
 * progress, so without the ordering the first sync would run the graph too
 * early or too late), and c checked. */
static void finish(struct fixture *f, tf_runtime *first, tf_runtime *second) {
    enqueue(f->s, &f->after);
    assert_ok(tf_runtime_sync(first));
    assert_ok(tf_runtime_sync(second));
    expect_c(f, kWant);
}

static void round_trip(struct fixture *f, tf_runtime *launcher, tf_runtime *first,
                       tf_runtime *second) {
    prepare(f);
    assert_ok(tf_graph_launch(launcher, f->graph));
    finish(f, first, second);
}

/* The defect: launched from slot 1, the graph's GEMM raced slot 0's GEMMs
 * on slot 0's workspace.  Now it runs after slot 0's earlier work (slot 1
 * synchronized first: its wait runs slot 0 up to the mark) and before slot
 * 0's later work (slot 0 first: its wait runs the launch first). */
static void cross_slot_launch_is_ordered_both_ways(void **state) {
    struct fixture f;
    (void)state;
    SETUP_OR_SKIP(&f);
    round_trip(&f, f.t, f.t, f.s);
    round_trip(&f, f.t, f.s, f.t);
    round_trip(&f, f.s, f.s, f.t); /* on its own slot, the stream orders it */
    teardown(&f);
}

static size_t log_mark(void) { return tfd()->tfd_log_count(); }

/* The driver calls since `from` that order streams, comma-joined. */
static const char *ordering_calls(size_t from) {
    static char out[512];
    size_t i, n = tfd()->tfd_log_count();
    out[0] = '\0';
    for (i = from; i < n; ++i) {
        const char *e = tfd()->tfd_log_name(i);
        if (strcmp(e, "cuEventRecord") && strcmp(e, "cuStreamWaitEvent") &&
            strcmp(e, "cuGraphLaunch") && strcmp(e, "cuStreamSynchronize"))
            continue;
        if (out[0]) strcat(out, ",");
        strcat(out, e);
    }
    return out;
}

/* What each launch costs in driver calls: the cross-slot one four around
 * its cuGraphLaunch, in this order; the same-slot one none; a graph
 * without cuBLAS work none from either slot. */
static void only_cross_slot_launches_add_driver_calls(void **state) {
    struct fixture f;
    tf_graph *plain = NULL;
    size_t from;
    (void)state;
    REQUIRE_DOUBLE();
    SETUP_OR_SKIP(&f);
    assert_ok(tf_graph_capture_begin(f.s));
    assert_ok(tf_copy(f.s, f.x, f.c, 16));
    assert_ok(tf_graph_capture_end(f.s, &plain));
    assert_ok(tf_graph_launch(f.t, f.graph)); /* the order events exist from here */
    from = log_mark();
    assert_ok(tf_graph_launch(f.t, f.graph));
    assert_string_equal(ordering_calls(from),
                        "cuEventRecord,cuStreamWaitEvent,cuGraphLaunch,cuEventRecord,"
                        "cuStreamWaitEvent");
    from = log_mark();
    assert_ok(tf_graph_launch(f.s, f.graph));
    assert_string_equal(ordering_calls(from), "cuGraphLaunch");
    from = log_mark();
    assert_ok(tf_graph_launch(f.s, plain));
    assert_ok(tf_graph_launch(f.t, plain));
    assert_string_equal(ordering_calls(from), "cuGraphLaunch,cuGraphLaunch");
    assert_ok(tf_runtime_sync(f.t));
    assert_ok(tf_runtime_sync(f.s));
    assert_ok(tf_graph_release(plain));
    teardown(&f);
}

static int32_t lt_nothing(void *lt, void *stream, uint64_t workspace, uint64_t bytes,
                          void *user_data) {
    (void)lt, (void)stream, (void)workspace, (void)bytes, (void)user_data;
    return 0;
}

/* tf_cublaslt_enqueue in a capture marks the graph as tf_cublas_enqueue
 * does (the two handles share the slot's workspace), whatever its callback
 * queued. */
static void cublaslt_work_is_ordered_too(void **state) {
    struct fixture f;
    tf_graph *lt = NULL;
    size_t from;
    (void)state;
    REQUIRE_DOUBLE();
    SETUP_OR_SKIP(&f);
    assert_ok(tf_graph_capture_begin(f.s));
    assert_ok(tf_cublaslt_enqueue(f.s, lt_nothing, NULL));
    assert_ok(tf_copy(f.s, f.x, f.c, 16));
    assert_ok(tf_graph_capture_end(f.s, &lt));
    assert_ok(tf_graph_launch(f.t, lt));
    from = log_mark();
    assert_ok(tf_graph_launch(f.t, lt));
    assert_string_equal(ordering_calls(from),
                        "cuEventRecord,cuStreamWaitEvent,cuGraphLaunch,cuEventRecord,"
                        "cuStreamWaitEvent");
    assert_ok(tf_runtime_sync(f.t));
    assert_ok(tf_runtime_sync(f.s));
    assert_ok(tf_graph_release(lt));
    teardown(&f);
}

/* While slot 0 captures, a launch from slot 1 cannot be ordered with slot
 * 0's work (its marks would go into the capture): refused, nothing queued
 * on either slot, the capture intact. */
static void launch_while_its_slot_captures_is_refused(void **state) {
    struct fixture f;
    void *t_stream = NULL, *s_stream = NULL;
    unsigned long t_pending, nodes;
    (void)state;
    REQUIRE_DOUBLE();
    SETUP_OR_SKIP(&f);
    assert_ok(tf_runtime_stream(f.t, &t_stream));
    assert_ok(tf_runtime_stream(f.s, &s_stream));
    assert_ok(tf_graph_capture_begin(f.s));
    enqueue(f.s, &f.before);
    t_pending = tfd()->tfd_pending(t_stream);
    nodes = tfd()->tfd_capture_nodes(s_stream);
    assert_failure(tf_graph_launch(f.t, f.graph), TF_ERROR_RUNTIME_STATE, "tf_graph_launch",
                   "uses the workspace of slot 0, which is capturing a graph now");
    assert_int_equal(tfd()->tfd_pending(t_stream), t_pending);
    assert_int_equal(tfd()->tfd_capture_nodes(s_stream), nodes);
    assert_ok(tf_graph_capture_abort(f.s));
    round_trip(&f, f.t, f.t, f.s); /* usable afterwards */
    teardown(&f);
}

/* A failed mark or wait before the launch: the driver's status, nothing
 * launched.  A failed record or wait after it: the host waits for slot 1
 * instead, the launch succeeds, the order holds and a warning says so;
 * when that wait fails too, its status and a message that the graph is
 * queued unordered. */
static void failures_of_the_ordering(void **state) {
    struct fixture f;
    void *t_stream = NULL;
    const char *log;
    (void)state;
    REQUIRE_DOUBLE();
    SETUP_OR_SKIP(&f);
    assert_ok(tf_runtime_stream(f.t, &t_stream));
    round_trip(&f, f.t, f.t, f.s); /* the order events exist from here */
    INJECT("cuEventRecord", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_graph_launch(f.t, f.graph), TF_ERROR_CUDA, "tf_graph_launch",
                   "cuEventRecord failed");
    assert_int_equal(tfd()->tfd_pending(t_stream), 0);
    INJECT("cuStreamWaitEvent", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_graph_launch(f.t, f.graph), TF_ERROR_CUDA, "tf_graph_launch",
                   "cuStreamWaitEvent failed");
    assert_int_equal(tfd()->tfd_pending(t_stream), 0);
    INJECT("cuGraphLaunch", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_graph_launch(f.t, f.graph), TF_ERROR_CUDA, "tf_graph_launch",
                   "cuGraphLaunch failed");
    assert_ok(tf_runtime_sync(f.t)); /* at most a wait for slot 0 was left */
    {
        const char *after[] = {"cuEventRecord", "cuStreamWaitEvent"};
        int i;
        for (i = 0; i < 2; ++i) {
            prepare(&f);
            INJECT(after[i], 2, CUDA_ERROR_UNKNOWN, 1);
            log_capture_start();
            assert_ok(tf_graph_launch(f.t, f.graph));
            log = log_capture_stop();
            assert_int_equal(tfd()->tfd_pending(t_stream), 0); /* waited for */
            finish(&f, f.s, f.t);
            assert_non_null(strstr(log, "failed"));
            assert_non_null(strstr(log, "waiting for slot 1's stream instead"));
        }
    }
    prepare(&f);
    INJECT("cuEventRecord", 2, CUDA_ERROR_UNKNOWN, 1);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_failure(tf_graph_launch(f.t, f.graph), TF_ERROR_CUDA, "tf_graph_launch",
                   "the graph is queued on slot 1, but slot 0's later work",
                   "could not be ordered after it", "cuStreamSynchronize failed");
    log_capture_stop();
    assert_ok(tf_runtime_sync(f.t));
    assert_ok(tf_runtime_sync(f.s));
    teardown(&f);
}

/* Launches from enqueue callbacks. */
struct in_callback {
    tf_runtime *launcher;
    tf_graph *graph;
    tf_status st;
};

static int32_t launch_inside(void *stream, void *user_data) {
    struct in_callback *c = user_data;
    (void)stream;
    c->st = tf_graph_launch(c->launcher, c->graph);
    return 0;
}

/* Inside a callback under slot 1's lock a launch that needs slot 0's lock
 * is refused (waiting could deadlock with a callback on slot 0 doing the
 * mirror image), from either slot; under slot 0's lock it needs nothing
 * more, from either slot; a graph without cuBLAS work launches anywhere. */
static void launches_from_callbacks(void **state) {
    struct fixture f;
    struct in_callback c;
    tf_graph *plain = NULL;
    (void)state;
    SETUP_OR_SKIP(&f);
    c.graph = f.graph;
    c.launcher = f.t;
    assert_ok(tf_stream_enqueue(f.t, launch_inside, &c));
    assert_failure(c.st, TF_ERROR_RUNTIME_STATE, "tf_graph_launch", "uses the workspace of slot 0",
                   "holds another slot's lock");
    c.launcher = f.s;
    assert_ok(tf_stream_enqueue(f.t, launch_inside, &c));
    assert_int_equal(c.st, TF_ERROR_RUNTIME_STATE);
    c.launcher = f.t;
    prepare(&f);
    assert_ok(tf_stream_enqueue(f.s, launch_inside, &c));
    assert_ok(c.st);
    finish(&f, f.s, f.t);
    c.launcher = f.s;
    assert_ok(tf_stream_enqueue(f.s, launch_inside, &c));
    assert_ok(c.st);
    assert_ok(tf_graph_capture_begin(f.s));
    assert_ok(tf_copy(f.s, f.x, f.c, 16));
    assert_ok(tf_graph_capture_end(f.s, &plain));
    c.graph = plain;
    c.launcher = f.s;
    assert_ok(tf_stream_enqueue(f.t, launch_inside, &c));
    assert_ok(c.st);
    assert_ok(tf_runtime_sync(f.s));
    assert_ok(tf_runtime_sync(f.t));
    assert_ok(tf_graph_release(plain));
    teardown(&f);
}

struct launcher {
    struct fixture *f;
    int launched, refused;
    char unexpected[TF_ERROR_MESSAGE_CAPACITY]; /* the first other failure */
};

/* Launches from slot 1; while slot 0 captures each is refused (its work
 * cannot be ordered with a capture), any other failure is kept. */
static void *launch_repeatedly(void *arg) {
    struct launcher *l = arg;
    int i;
    for (i = 0; i < 200 && !l->unexpected[0]; ++i) {
        tf_status st = tf_graph_launch(l->f->t, l->f->graph);
        if (st == TF_OK)
            ++l->launched;
        else if (st == TF_ERROR_RUNTIME_STATE &&
                 strstr(tf_last_error_message(), "which is capturing a graph now"))
            ++l->refused;
        else
            snprintf(l->unexpected, sizeof l->unexpected, "%s", tf_last_error_message());
    }
    return NULL;
}

/* Launches from slot 1 while slot 0 updates the same graph from new
 * captures and queues its own GEMMs: an update holds slot 0's lock, then
 * the graph's; a launch takes them in the same order, so neither waits
 * for the other forever.  Each launch succeeds, or is refused while slot 0
 * captures. */
static void launches_race_updates_of_the_graph(void **state) {
    struct fixture f;
    struct launcher l;
    pthread_t th;
    int i;
    int32_t in_place = 0;
    (void)state;
    SETUP_OR_SKIP(&f);
    memset(&l, 0, sizeof l);
    l.f = &f;
    assert_int_equal(pthread_create(&th, NULL, launch_repeatedly, &l), 0);
    for (i = 0; i < 50; ++i) {
        enqueue(f.s, &f.before);
        assert_ok(tf_graph_capture_begin(f.s));
        enqueue(f.s, &f.captured);
        assert_ok(tf_graph_capture_update(f.s, f.graph, &in_place));
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_string_equal(l.unexpected, "");
    assert_int_equal(l.launched + l.refused, 200);
    assert_ok(tf_runtime_sync(f.t));
    assert_ok(tf_runtime_sync(f.s));
    round_trip(&f, f.t, f.t, f.s);
    teardown(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(cross_slot_launch_is_ordered_both_ways),
        TF_TEST(only_cross_slot_launches_add_driver_calls),
        TF_TEST(cublaslt_work_is_ordered_too),
        TF_TEST(launch_while_its_slot_captures_is_refused),
        TF_TEST(failures_of_the_ordering),
        TF_TEST(launches_from_callbacks),
        TF_TEST(launches_race_updates_of_the_graph),
    };
    return cmocka_run_group_tests_name("graph_workspace", tests, NULL, NULL);
}
