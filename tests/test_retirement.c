/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tf_workspace_retire: a release runs once the slot's stream passed the
 * event recorded at retirement (found by later retirements, polls and syncs,
 * drained at teardown), in retirement order, with the primary context
 * current; a full queue or a failed event falls back to a barrier; what
 * cannot be proven done is leaked and counted, never released early. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support/raw_memory.h"
#include "support/test_support.h"

enum { MAX_RELEASES = 4096 };

static struct {
    pthread_mutex_t lock;
    int order[MAX_RELEASES];
    int count;
    int wrong_context;
    void *primary;
} g = {PTHREAD_MUTEX_INITIALIZER, {0}, 0, 0, NULL};

static void reset_releases(tf_runtime *rt) {
    g.count = 0;
    g.wrong_context = 0;
    assert_ok(tf_runtime_primary_context(rt, &g.primary));
}

static void release(void *resource, void *user_data) {
    (void)user_data;
    pthread_mutex_lock(&g.lock);
    if (g.count < MAX_RELEASES) g.order[g.count] = (int)(intptr_t)resource;
    g.count++;
    if (raw_current_context() != g.primary) g.wrong_context++;
    pthread_mutex_unlock(&g.lock);
}

static tf_retirement_stats stats(tf_runtime *rt) {
    tf_retirement_stats s;
    tf_retirement_stats_init(&s, sizeof s);
    assert_ok(tf_workspace_stats(rt, &s));
    return s;
}

static tf_runtime *runtime_with_capacity(uint32_t capacity) {
    tf_runtime *rt = NULL;
    tf_runtime_options o;
    tf_runtime_options_init(&o, sizeof o);
    o.retirement_capacity = capacity;
    assert_ok(tf_runtime_new_with_options(0, &o, &rt));
    return rt;
}

/* A runtime of two slots and a handle bound to each. */
static tf_runtime *two_slots(uint32_t capacity, tf_runtime **b0, tf_runtime **b1) {
    tf_runtime *rt = NULL;
    tf_runtime_options o;
    tf_runtime_options_init(&o, sizeof o);
    o.stream_slots = 2;
    o.retirement_capacity = capacity;
    assert_ok(tf_runtime_new_with_options(0, &o, &rt));
    assert_ok(tf_runtime_bind_slot(rt, 0, b0));
    assert_ok(tf_runtime_bind_slot(rt, 1, b1));
    return rt;
}

static void retire(tf_runtime *rt, int id) {
    assert_ok(tf_workspace_retire(rt, (void *)(intptr_t)id, release, NULL));
}

/* A runtime with retirements 1..n queued behind events the double's stream
 * has not reached yet (deferred execution: until a sync, a step or a
 * drain). */
static tf_runtime *runtime_with_pending(int n) {
    tf_runtime *rt = new_runtime();
    int i;
    reset_releases(rt);
    for (i = 1; i <= n; ++i) retire(rt, i);
    return rt;
}

static void released_once_the_stream_passed_it(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context();
    tf_retirement_stats s;
    int i;
    reset_releases(rt);
    raw_set_current_context(other);
    for (i = 1; i <= 3; ++i) retire(rt, i);
    assert_int_equal(g.count, 0);
    assert_ok(tf_workspace_poll(rt));
    assert_int_equal(g.count, 0); /* not reached yet */
    s = stats(rt);
    assert_int_equal(s.deferred, 3);
    assert_int_equal(s.in_flight, 3);
    assert_int_equal(s.released, 0);
    assert_int_equal(s.capacity, TF_DEFAULT_RETIREMENT_CAPACITY);
    tfd()->tfd_drain_all();
    assert_ok(tf_workspace_poll(rt));
    assert_int_equal(g.count, 3);
    for (i = 0; i < 3; ++i) assert_int_equal(g.order[i], i + 1);
    assert_int_equal(g.wrong_context, 0);
    assert_ptr_equal(raw_current_context(), other);
    s = stats(rt);
    assert_int_equal(s.released, 3);
    assert_int_equal(s.in_flight, 0);
    assert_int_equal(s.max_in_flight, 3);
    assert_int_equal(s.barrier_fallbacks, 0);
    assert_int_equal(s.leaked, 0);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
}

static void sync_runs_what_it_waited_for(void **state) {
    tf_runtime *rt;
    (void)state;
    REQUIRE_DOUBLE();
    rt = runtime_with_pending(2);
    assert_int_equal(g.count, 0);
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(g.count, 2);
    assert_int_equal(stats(rt).in_flight, 0);
    assert_ok(tf_runtime_release(rt));
}

/* Steady state creates no events: completed ones are reused. */
static void events_are_pooled(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    long events;
    int i;
    /* The device keeps up: each event query lets the stream run one op, so
     * every retirement finds the previous one done. */
    tfd()->tfd_set_query_progress(1);
    reset_releases(rt);
    retire(rt, 1);
    events = tfd()->tfd_live(TFD_EVENTS);
    for (i = 2; i <= 50; ++i) retire(rt, i); /* each finds the previous one done */
    assert_int_equal(tfd()->tfd_calls("cuEventCreate"), 1);
    assert_int_equal(tfd()->tfd_live(TFD_EVENTS), events);
    assert_int_equal(g.count, 49);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(g.count, 50);
    assert_int_equal(tfd()->tfd_live(TFD_EVENTS), events - 1);
}

static void full_queue_waits_for_the_stream(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = runtime_with_capacity(2);
    tf_retirement_stats s;
    reset_releases(rt);
    retire(rt, 1);
    retire(rt, 2);
    assert_int_equal(tfd()->tfd_calls("cuStreamSynchronize"), 0);
    /* Full: waits for the stream, which also passed 1 and 2; they are
     * released first, then 3, before the call returns. */
    retire(rt, 3);
    assert_int_equal(tfd()->tfd_calls("cuStreamSynchronize"), 1);
    assert_int_equal(g.count, 3);
    assert_int_equal(g.order[0], 1);
    assert_int_equal(g.order[1], 2);
    assert_int_equal(g.order[2], 3);
    s = stats(rt);
    assert_int_equal(s.barrier_fallbacks, 1);
    assert_int_equal(s.deferred, 2);
    assert_int_equal(s.in_flight, 0);
    assert_int_equal(s.released, 3);
    assert_int_equal(s.capacity, 2);
    retire(rt, 4); /* room again: queued */
    assert_int_equal(g.count, 3);
    assert_int_equal(stats(rt).in_flight, 1);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(g.count, 4);
}

static void check_event_fallback(const char *entry) {
    tf_runtime *rt = new_runtime();
    tf_retirement_stats s;
    long events;
    reset_releases(rt);
    retire(rt, 1); /* makes the stream */
    assert_ok(tf_workspace_poll(rt));
    assert_ok(tf_runtime_sync(rt)); /* 1 released, its event pooled */
    assert_int_equal(g.count, 1);
    events = tfd()->tfd_live(TFD_EVENTS);
    INJECT(entry, 1, CUDA_ERROR_INVALID_VALUE, 1);
    if (strcmp(entry, "cuEventCreate") == 0) {
        /* a pooled event exists: use it up (retirement 2 stays pending)
         * so that a new one is needed */
        retire(rt, 2);
    }
    retire(rt, 3); /* falls back to waiting: released before it returns */
    assert_int_equal(g.order[g.count - 1], 3);
    s = stats(rt);
    assert_int_equal(s.barrier_fallbacks, 1);
    assert_int_equal(s.leaked, 0);
    assert_null(raw_current_context());
    assert_int_equal(tf_last_error_status(), TF_OK); /* swallowed: the call succeeded */
    if (strcmp(entry, "cuEventRecord") == 0)         /* a failed record is not reused */
        assert_int_equal(tfd()->tfd_live(TFD_EVENTS), events - 1);
    assert_ok(tf_runtime_release(rt));
}

static void event_creation_failure_falls_back(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_event_fallback("cuEventCreate");
}

static void event_record_failure_falls_back(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_event_fallback("cuEventRecord");
}

static void failed_barrier_leaks_and_reports(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context();
    tf_retirement_stats s;
    /* The device keeps up: retirement 2's poll finds 1 done. */
    tfd()->tfd_set_query_progress(1);
    reset_releases(rt);
    retire(rt, 1);
    raw_set_current_context(other);
    INJECT("cuEventRecord", 1, CUDA_ERROR_INVALID_VALUE, 1);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_workspace_retire(rt, (void *)2, release, NULL), TF_ERROR_CUDA,
                   "tf_workspace_retire", "cuStreamSynchronize failed", "CUDA_ERROR_UNKNOWN (999)");
    assert_ptr_equal(raw_current_context(), other);
    assert_int_equal(g.count, 1); /* 2 never runs */
    s = stats(rt);
    assert_int_equal(s.leaked, 1);
    assert_int_equal(s.barrier_fallbacks, 1);
    assert_int_equal(s.released, 1);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(g.count, 1);
}

static void failed_query_waits_for_the_stream(void **state) {
    tf_runtime *rt;
    tf_retirement_stats s;
    (void)state;
    REQUIRE_DOUBLE();
    rt = runtime_with_pending(1);
    INJECT("cuEventQuery", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    assert_ok(tf_workspace_poll(rt));
    assert_int_equal(g.count, 1);
    s = stats(rt);
    /* It was queued (deferred): not a barrier fallback, which counts only
     * retirements that never were. */
    assert_int_equal(s.deferred, 1);
    assert_int_equal(s.barrier_fallbacks, 0);
    assert_int_equal(s.released, 1);
    assert_int_equal(s.in_flight, 0);
    assert_ok(tf_runtime_release(rt));
}

static void failed_query_and_wait_leak(void **state) {
    tf_runtime *rt;
    tf_retirement_stats s;
    const char *warnings;
    (void)state;
    REQUIRE_DOUBLE();
    rt = runtime_with_pending(1);
    INJECT("cuEventQuery", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_failure(tf_workspace_poll(rt), TF_ERROR_CUDA, "tf_workspace_poll",
                   "cuStreamSynchronize failed");
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "leaking retired resource 0x1"));
    assert_int_equal(g.count, 0);
    s = stats(rt);
    assert_int_equal(s.leaked, 1);
    assert_int_equal(s.in_flight, 0);
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(g.count, 0);
}

/* The last release runs what is pending, in order, before the slot
 * resources and streams go; with the primary context current. */
static void teardown_drains_in_order(void **state) {
    tf_runtime *rt;
    void *other;
    int i;
    (void)state;
    REQUIRE_DOUBLE();
    rt = runtime_with_pending(5);
    other = raw_create_context();
    raw_set_current_context(other);
    assert_int_equal(g.count, 0);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(g.count, 5);
    for (i = 0; i < 5; ++i) assert_int_equal(g.order[i], i + 1);
    assert_int_equal(g.wrong_context, 0);
    assert_ptr_equal(raw_current_context(), other);
    assert_int_equal(tfd()->tfd_reclaimed(TFD_EVENTS), 0);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
}

static void teardown_without_proof_leaks(void **state) {
    tf_runtime *rt;
    (void)state;
    REQUIRE_DOUBLE();
    rt = runtime_with_pending(1);
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    log_capture_stop();
    assert_int_equal(g.count, 0);
}

static void bad_arguments(void **state) {
    tf_runtime *rt = new_runtime();
    tf_retirement_stats s;
    (void)state;
    assert_failure(tf_workspace_retire(rt, NULL, NULL, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_workspace_retire", "release is NULL");
    assert_failure(tf_workspace_retire(NULL, NULL, release, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_workspace_retire", "NULL");
    assert_failure(tf_workspace_poll(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_workspace_poll", "NULL");
    assert_failure(tf_workspace_stats(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_workspace_stats",
                   "out is NULL");
    memset(&s, 0, sizeof s);
    assert_failure(tf_workspace_stats(rt, &s), TF_ERROR_INVALID_ARGUMENT, "tf_workspace_stats",
                   "struct_size 0 is too small");
    tf_retirement_stats_init(NULL, 0);
    assert_ok(tf_runtime_release(rt));
}

/* A release may call the library, even retire again. */
struct nested {
    tf_runtime *rt;
    tf_status status;
};

static void retire_again(void *resource, void *user_data) {
    struct nested *n = user_data;
    (void)resource;
    n->status = tf_workspace_retire(n->rt, (void *)99, release, NULL);
}

static void release_may_call_the_library(void **state) {
    tf_runtime *rt = new_runtime();
    struct nested n;
    (void)state;
    reset_releases(rt);
    n.rt = rt;
    n.status = -1;
    assert_ok(tf_workspace_retire(rt, NULL, retire_again, &n));
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(n.status, TF_OK);
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(g.count, 1);
    assert_int_equal(g.order[0], 99);
    assert_ok(tf_runtime_release(rt));
}

/* On any driver: releases follow retirement order, and each runs only once
 * the work queued before its retirement is done.  Before retirement i the
 * slot stream uploads pattern i into buffer i; release i reads the buffer
 * with a copy ordered with no slot stream, so it would see old data if it
 * ran before the stream passed the upload. */
enum { ORDER_N = 16, ORDER_WORDS = 256 << 10 };

struct ordered {
    uint64_t buffer[ORDER_N];
    uint32_t *pattern[ORDER_N];
    uint32_t *seen;
    int mismatches;
};

static struct ordered *g_ordered;

static void release_and_check(void *resource, void *user_data) {
    int i = (int)(intptr_t)resource - 1, w;
    (void)user_data;
    dev_read_unordered(g_ordered->seen, g_ordered->buffer[i], (size_t)ORDER_WORDS * 4);
    for (w = 0; w < ORDER_WORDS; ++w)
        if (g_ordered->seen[w] != g_ordered->pattern[i][w]) {
            g_ordered->mismatches++;
            break;
        }
    release(resource, NULL);
}

static void retirement_order_on_one_slot(void **state) {
    tf_runtime *rt = new_runtime();
    struct ordered o;
    tf_retirement_stats s;
    int i, w;
    (void)state;
    reset_releases(rt);
    memset(&o, 0, sizeof o);
    g_ordered = &o;
    o.seen = malloc((size_t)ORDER_WORDS * 4);
    for (i = 0; i < ORDER_N; ++i) {
        o.pattern[i] = malloc((size_t)ORDER_WORDS * 4);
        for (w = 0; w < ORDER_WORDS; ++w) o.pattern[i][w] = (uint32_t)(i * 7919 + w) | 1u;
        o.buffer[i] = dev_alloc(rt, (size_t)ORDER_WORDS * 4);
    }
    for (i = 0; i < ORDER_N; ++i) {
        dev_upload_async(rt, o.buffer[i], o.pattern[i], (size_t)ORDER_WORDS * 4);
        assert_ok(tf_workspace_retire(rt, (void *)(intptr_t)(i + 1), release_and_check, NULL));
    }
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(g.count, ORDER_N);
    for (i = 0; i < ORDER_N; ++i) assert_int_equal(g.order[i], i + 1);
    assert_int_equal(o.mismatches, 0);
    assert_int_equal(g.wrong_context, 0);
    s = stats(rt);
    assert_int_equal(s.released, ORDER_N);
    assert_int_equal(s.in_flight, 0);
    assert_int_equal(s.leaked, 0);
    assert_int_equal(s.deferred + s.barrier_fallbacks, ORDER_N);
    assert_null(raw_current_context());
    for (i = 0; i < ORDER_N; ++i) {
        dev_free(rt, o.buffer[i]);
        free(o.pattern[i]);
    }
    free(o.seen);
    assert_ok(tf_runtime_release(rt));
}

struct worker {
    tf_runtime *rt;
    int failures; /* calls that did not return TF_OK */
};

static void *retire_many(void *arg) {
    struct worker *w = arg;
    int i;
    for (i = 0; i < 200; ++i) {
        w->failures +=
            tf_workspace_retire(w->rt, (void *)(intptr_t)(i + 1), release, NULL) != TF_OK;
        if (i % 50 == 49) w->failures += tf_workspace_poll(w->rt) != TF_OK;
    }
    w->failures += tf_runtime_sync(w->rt) != TF_OK;
    return NULL;
}

static void threads_retire_concurrently(void **state) {
    enum { T = 4 };
    tf_runtime *rt = new_runtime_with_slots(T);
    pthread_t th[T];
    struct worker w[T];
    tf_retirement_stats s;
    int i;
    (void)state;
    reset_releases(rt);
    for (i = 0; i < T; ++i) {
        assert_ok(tf_runtime_bind_slot(rt, i, &w[i].rt));
        w[i].failures = 0;
        pthread_create(&th[i], NULL, retire_many, &w[i]);
    }
    for (i = 0; i < T; ++i) pthread_join(th[i], NULL);
    for (i = 0; i < T; ++i) {
        assert_int_equal(w[i].failures, 0);
        assert_ok(tf_runtime_sync(w[i].rt));
        assert_ok(tf_runtime_release(w[i].rt));
    }
    s = stats(rt);
    assert_int_equal(s.released + s.in_flight, T * 200);
    assert_int_equal(s.leaked, 0);
    assert_int_equal(s.in_flight, 0);
    assert_int_equal(g.count, T * 200);
    assert_int_equal(g.wrong_context, 0);
    assert_ok(tf_runtime_release(rt));
}

/* ---- the counters' invariant, unwinding releases, leaks reported once ----- */

/* deferred + barrier_fallbacks == released + leaked + in_flight */
static int consistent(const tf_retirement_stats *s) {
    return s->deferred + s->barrier_fallbacks == s->released + s->leaked + s->in_flight;
}

/* The counters of `rt`, which must add up and be these. */
static void expect_stats(tf_runtime *rt, uint64_t deferred, uint64_t barrier_fallbacks,
                         uint64_t released, uint64_t leaked) {
    tf_retirement_stats s = stats(rt);
    assert_true(consistent(&s));
    assert_int_equal(s.deferred, deferred);
    assert_int_equal(s.barrier_fallbacks, barrier_fallbacks);
    assert_int_equal(s.released, released);
    assert_int_equal(s.leaked, leaked);
    assert_int_equal(s.in_flight, 0);
}

static struct {
    tf_runtime *rt;
    int taken, inconsistent;
    tf_retirement_stats last;
} g_snap;

/* A release that takes a snapshot of its runtime's counters (no cmocka
 * assertion in here: it runs inside the library). */
static void snapshot_release(void *resource, void *user_data) {
    tf_retirement_stats s;
    tf_retirement_stats_init(&s, sizeof s);
    if (tf_workspace_stats(g_snap.rt, &s) != TF_OK || !consistent(&s)) g_snap.inconsistent++;
    g_snap.taken++;
    g_snap.last = s;
    release(resource, user_data);
}

/* Every snapshot, from inside releases too, adds up: a retirement whose
 * event query failed stays in flight until the wait for its stream
 * returns, while the releases found with it run first. */
static void snapshots_in_releases_add_up(void **state) {
    tf_runtime *b0 = NULL, *b1 = NULL, *rt;
    (void)state;
    REQUIRE_DOUBLE();
    rt = two_slots(2, &b0, &b1);
    reset_releases(rt);
    memset(&g_snap, 0, sizeof g_snap);
    g_snap.rt = rt;
    tfd()->tfd_set_async_pending(1);
    assert_ok(tf_workspace_retire(b0, (void *)1, snapshot_release, NULL));
    assert_ok(tf_workspace_retire(b1, (void *)2, snapshot_release, NULL));
    tfd()->tfd_complete_all();
    /* Slot 0's query fails (its stream is then waited for), slot 1's passed:
     * 2 runs first, while 1 is neither released nor leaked yet. */
    INJECT("cuEventQuery", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    assert_ok(tf_workspace_poll(rt));
    assert_int_equal(g.count, 2);
    assert_int_equal(g.order[0], 2);
    assert_int_equal(g.order[1], 1);
    /* A full queue: the barrier fallback's own release, after the older. */
    assert_ok(tf_workspace_retire(b0, (void *)3, snapshot_release, NULL));
    assert_ok(tf_workspace_retire(b0, (void *)4, snapshot_release, NULL));
    assert_ok(tf_workspace_retire(b0, (void *)5, snapshot_release, NULL));
    assert_int_equal(g.count, 5);
    assert_int_equal(g_snap.taken, 5);
    assert_int_equal(g_snap.inconsistent, 0);
    expect_stats(rt, 4, 1, 5, 0);
    tfd()->tfd_set_async_pending(0);
    assert_ok(tf_runtime_release(b0));
    assert_ok(tf_runtime_release(b1));
    assert_ok(tf_runtime_release(rt));
}

/* A release that drops the last reference to the runtime whose
 * tf_runtime_sync runs it: the runtime stays alive until the sync is over
 * (the other releases it found still run, their streams intact), then goes. */
static struct { tf_runtime *last; } g_drop;

static void drop_last_reference(void *resource, void *user_data) {
    tf_runtime_release(g_drop.last);
    release(resource, user_data);
}

static void release_may_drop_the_last_reference_under_sync(void **state) {
    tf_runtime *b0 = NULL, *b1 = NULL, *rt;
    (void)state;
    REQUIRE_DOUBLE();
    rt = two_slots(TF_DEFAULT_RETIREMENT_CAPACITY, &b0, &b1);
    reset_releases(rt);
    tfd()->tfd_set_async_pending(1);
    assert_ok(tf_workspace_retire(b1, (void *)2, release, NULL));
    g_drop.last = b0;
    assert_ok(tf_workspace_retire(b0, (void *)1, drop_last_reference, NULL));
    assert_ok(tf_runtime_release(b1));
    assert_ok(tf_runtime_release(rt)); /* b0 holds the runtime alone */
    /* The sync passes slot 0 (1 runs and drops b0); slot 1's query fails,
     * so its stream is waited for after 1's release. */
    INJECT("cuEventQuery", 2, CUDA_ERROR_INVALID_HANDLE, 1);
    assert_ok(tf_runtime_sync(b0));
    assert_int_equal(g.count, 2);
    assert_int_equal(g.order[0], 1);
    assert_int_equal(g.order[1], 2);
    assert_int_equal(tf_runtime_retain(b0), TF_ERROR_INVALID_HANDLE); /* gone now */
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    assert_int_equal(tfd()->tfd_live(TFD_STREAMS), 0);
    tfd()->tfd_set_async_pending(0);
}

/* A retirement whose event query and stream wait failed, found inside
 * tf_workspace_retire (plain, or in its barrier fallback): the retire
 * reports its own resource (queued, or released: TF_OK); the leak is
 * logged there and reported by the next poll or sync, once. */
static tf_status after_leak(tf_runtime *rt, int by_sync) {
    return by_sync ? tf_runtime_sync(rt) : tf_workspace_poll(rt);
}

static void check_leak_found_inside_retire(int in_barrier, int by_sync) {
    tf_runtime *rt = runtime_with_capacity(in_barrier ? 1 : 8);
    const char *op = by_sync ? "tf_runtime_sync" : "tf_workspace_poll";
    const char *warnings;
    tf_retirement_stats s;
    reset_releases(rt);
    tfd()->tfd_set_async_pending(1);
    retire(rt, 1); /* still pending on the device */
    if (in_barrier) {
        /* Full: the retire waits for the stream (which succeeds), then
         * finds 1 there: its query and its stream wait fail. */
        INJECT("cuEventQuery", 2, CUDA_ERROR_INVALID_HANDLE, 1);
        INJECT("cuStreamSynchronize", 2, CUDA_ERROR_UNKNOWN, 1);
    } else {
        INJECT("cuEventQuery", 1, CUDA_ERROR_INVALID_HANDLE, 1);
        INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    }
    log_capture_start();
    assert_ok(tf_workspace_retire(rt, (void *)2, release, NULL));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "leaking retired resource 0x1"));
    assert_int_equal(g.count, in_barrier ? 1 : 0); /* 2 itself: released by the barrier */
    s = stats(rt);
    assert_int_equal(s.leaked, 1);
    assert_true(consistent(&s));
    tfd()->tfd_set_async_pending(0);
    tf_clear_last_error();
    assert_failure(after_leak(rt, by_sync), TF_ERROR_CUDA, op, "cuStreamSynchronize failed",
                   "CUDA_ERROR_UNKNOWN (999)", "1 retired resource leaked (the first: 0x1)");
    assert_string_equal(tf_last_error_call(), "cuStreamSynchronize");
    assert_int_equal(tf_last_error_code(), CUDA_ERROR_UNKNOWN);
    assert_ok(after_leak(rt, by_sync)); /* once */
    assert_ok(tf_runtime_sync(rt));
    assert_int_equal(g.count, 1);
    assert_int_equal(g.order[0], 2);
    assert_ok(tf_runtime_release(rt));
}

static void leak_found_inside_retire_is_reported_once(void **state) {
    int in_barrier, by_sync;
    (void)state;
    REQUIRE_DOUBLE();
    for (in_barrier = 0; in_barrier < 2; ++in_barrier)
        for (by_sync = 0; by_sync < 2; ++by_sync) {
            tfd()->tfd_reset();
            check_leak_found_inside_retire(in_barrier, by_sync);
        }
}

/* A release that ends its thread (pthread_exit, or cancellation acted on
 * inside it): the releases its call found but never started, and a
 * retirement whose stream wait never ran, count as leaked; the counters
 * still add up, and nothing of them runs later. */
struct unwinding {
    tf_runtime *rt;
    int how; /* 0: pthread_exit, 1: cancellation */
    tf_status status;
};

static void exit_thread_release(void *resource, void *user_data) {
    struct unwinding *u = user_data;
    release(resource, NULL);
    if (u->how == 0) pthread_exit(NULL);
    pthread_cancel(pthread_self());
    pthread_testcancel();
}

static void *poll_on_thread(void *arg) {
    struct unwinding *u = arg;
    u->status = tf_workspace_poll(u->rt);
    return NULL;
}

static void check_unwinding_release(int how) {
    tf_runtime *b0 = NULL, *b1 = NULL, *rt = two_slots(TF_DEFAULT_RETIREMENT_CAPACITY, &b0, &b1);
    struct unwinding u;
    pthread_t th;
    reset_releases(rt);
    u.rt = rt;
    u.how = how;
    u.status = -1;
    tfd()->tfd_set_async_pending(1);
    assert_ok(tf_workspace_retire(b0, (void *)1, exit_thread_release, &u));
    assert_ok(tf_workspace_retire(b0, (void *)2, release, NULL));
    assert_ok(tf_workspace_retire(b0, (void *)3, release, NULL));
    assert_ok(tf_workspace_retire(b1, (void *)4, release, NULL));
    tfd()->tfd_complete_all();
    /* Slot 0's three passed; slot 1's query fails: its wait comes after the
     * releases, which never get past the first. */
    INJECT("cuEventQuery", 4, CUDA_ERROR_INVALID_HANDLE, 1);
    log_capture_start();
    assert_int_equal(pthread_create(&th, NULL, poll_on_thread, &u), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_non_null(strstr(log_capture_stop(), "leaking 3 retired resources"));
    assert_int_equal(u.status, -1); /* the call never returned */
    assert_int_equal(g.count, 1);
    expect_stats(rt, 4, 0, 1, 3);
    assert_ok(tf_workspace_poll(rt));
    assert_ok(tf_runtime_sync(b0));
    assert_ok(tf_runtime_sync(b1));
    assert_int_equal(g.count, 1);
    tfd()->tfd_set_async_pending(0);
    assert_ok(tf_runtime_release(b0));
    assert_ok(tf_runtime_release(b1));
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(g.count, 1); /* not at teardown either */
}

static void unwinding_release_leaks_the_rest(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_unwinding_release(0);
    tfd()->tfd_reset();
    check_unwinding_release(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(released_once_the_stream_passed_it),
        TF_TEST(sync_runs_what_it_waited_for),
        TF_TEST(events_are_pooled),
        TF_TEST(full_queue_waits_for_the_stream),
        TF_TEST(event_creation_failure_falls_back),
        TF_TEST(event_record_failure_falls_back),
        TF_TEST(failed_barrier_leaks_and_reports),
        TF_TEST(failed_query_waits_for_the_stream),
        TF_TEST(failed_query_and_wait_leak),
        TF_TEST(teardown_drains_in_order),
        TF_TEST(teardown_without_proof_leaks),
        TF_TEST(bad_arguments),
        TF_TEST(release_may_call_the_library),
        TF_TEST(retirement_order_on_one_slot),
        TF_TEST(threads_retire_concurrently),
        TF_TEST(release_may_drop_the_last_reference_under_sync),
        TF_TEST(snapshots_in_releases_add_up),
        TF_TEST(unwinding_release_leaks_the_rest),
        TF_TEST(leak_found_inside_retire_is_reported_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
