/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Thread stress: 32 threads run mixed operations on shared runtimes and on
 * runtimes they create themselves, for a bounded time, checking every
 * result.  Against the double in make check (and under TSan in make tsan);
 * on the H200 against the real driver. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "support/test_support.h"

enum { THREADS = 32, SHARED = 3 };

struct world {
    tf_runtime *shared[SHARED];
    void *primary;
    double seconds;
    atomic_long ops;
    atomic_int failures;
    char first_failure[256];
    atomic_flag failure_noted;
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void note_failure(struct world *w, const char *what) {
    atomic_fetch_add(&w->failures, 1);
    if (!atomic_flag_test_and_set(&w->failure_noted))
        snprintf(w->first_failure, sizeof w->first_failure, "%s: %s", what,
                 tf_last_error_message());
}

#define EXPECT(w, cond, what)                   \
    do {                                        \
        if (!(cond)) note_failure((w), (what)); \
    } while (0)

static int32_t inside(void *user_data) {
    struct world *w = user_data;
    return raw_current_context() == w->primary ? 0 : 1;
}

/* One operation, picked by `op`, on a runtime shared by every thread. */
static void shared_op(struct world *w, unsigned op, unsigned r) {
    tf_runtime *rt = w->shared[r % SHARED], *bound = NULL;
    void *stream = NULL;
    int32_t slot = -1, n = 0;
    switch (op % 7) {
        case 0: EXPECT(w, tf_with_context(rt, inside, w) == TF_OK, "with_context"); break;
        case 1: EXPECT(w, tf_runtime_stream(rt, &stream) == TF_OK && stream, "stream"); break;
        case 2: EXPECT(w, tf_runtime_sync(rt) == TF_OK, "sync"); break;
        case 3:
            EXPECT(w, tf_runtime_retain(rt) == TF_OK, "retain");
            EXPECT(w, tf_runtime_release(rt) == TF_OK, "release");
            break;
        case 4:
            EXPECT(w, tf_runtime_slot_count(rt, &n) == TF_OK, "slot_count");
            EXPECT(w, tf_runtime_bind_slot(rt, (int32_t)(r % (unsigned)n), &bound) == TF_OK,
                   "bind");
            EXPECT(w,
                   tf_runtime_current_slot(bound, &slot) == TF_OK &&
                       slot == (int32_t)(r % (unsigned)n),
                   "bound slot");
            EXPECT(w, tf_runtime_stream(bound, &stream) == TF_OK, "bound stream");
            EXPECT(w, tf_runtime_release(bound) == TF_OK, "release bound");
            break;
        case 5: {
            tf_runtime *mine = NULL;
            EXPECT(w, tf_runtime_new(0, &mine) == TF_OK, "new");
            EXPECT(w, tf_with_context(mine, inside, w) == TF_OK, "own with_context");
            EXPECT(w, tf_runtime_stream(mine, &stream) == TF_OK, "own stream");
            EXPECT(w, tf_runtime_release(mine) == TF_OK, "own release");
            break;
        }
        case 6:
            EXPECT(w, tf_runtime_slot_stream(rt, (int32_t)(r % 2), &stream) == TF_OK,
                   "slot stream");
            break;
    }
    EXPECT(w, raw_current_context() == NULL, "caller context changed");
}

static void *worker(void *arg) {
    struct world *w = arg;
    unsigned seed = (unsigned)(size_t)pthread_self();
    double end = now() + w->seconds;
    long done = 0;
    while (now() < end) {
        seed = seed * 1103515245u + 12345u;
        shared_op(w, seed >> 16, seed >> 8);
        ++done;
    }
    atomic_fetch_add(&w->ops, done);
    return NULL;
}

static void thirty_two_threads_mixed(void **state) {
    struct world w;
    pthread_t t[THREADS];
    int i;
    (void)state;
    memset(&w, 0, sizeof w);
    atomic_flag_clear(&w.failure_noted);
    w.seconds = test_gpu_mode() ? 10.0 : 2.0;
    for (i = 0; i < SHARED; ++i) w.shared[i] = new_runtime_with_slots((uint32_t)(2 + i * 3));
    assert_ok(tf_runtime_primary_context(w.shared[0], &w.primary));
    for (i = 0; i < THREADS; ++i) assert_int_equal(pthread_create(&t[i], NULL, worker, &w), 0);
    for (i = 0; i < THREADS; ++i) pthread_join(t[i], NULL);
    print_message("    %ld operations from %d threads in %.0f s\n", atomic_load(&w.ops), THREADS,
                  w.seconds);
    if (atomic_load(&w.failures))
        fail_msg("%d failures; first: %s", atomic_load(&w.failures), w.first_failure);
    for (i = 0; i < SHARED; ++i) assert_ok(tf_runtime_release(w.shared[i]));
    if (tfd()) {
        assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
        assert_int_equal(tfd()->tfd_live(TFD_STREAMS), 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(thirty_two_threads_mixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
