/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Many threads share runtimes: context switches, streams, syncs, retains and
 * releases, each thread checking that its own context comes back. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "support/test_support.h"

enum { THREADS = 16, ROUNDS = 300 };

struct shared {
    tf_runtime *rt[2];
    void *primary;
    atomic_int failures;
};

static int32_t check_inside(void *user_data) {
    struct shared *s = user_data;
    return raw_current_context() == s->primary ? 0 : 1;
}

static void *hammer(void *arg) {
    struct shared *s = arg;
    int i;
    for (i = 0; i < ROUNDS; ++i) {
        tf_runtime *rt = s->rt[i & 1];
        void *stream = NULL;
        int ok = tf_runtime_retain(rt) == TF_OK;
        ok = ok && tf_with_context(rt, check_inside, s) == TF_OK;
        ok = ok && raw_current_context() == NULL;
        ok = ok && tf_runtime_stream(rt, &stream) == TF_OK && stream != NULL;
        ok = ok && tf_runtime_sync(rt) == TF_OK;
        ok = ok && tf_runtime_release(rt) == TF_OK;
        if (!ok) atomic_fetch_add(&s->failures, 1);
    }
    return NULL;
}

static void threads_share_runtimes(void **state) {
    struct shared s;
    pthread_t t[THREADS];
    int i;
    (void)state;
    memset(&s, 0, sizeof s);
    s.rt[0] = new_runtime_with_slots(4);
    s.rt[1] = new_runtime_with_slots(3);
    assert_ok(tf_runtime_primary_context(s.rt[0], &s.primary));
    for (i = 0; i < THREADS; ++i) assert_int_equal(pthread_create(&t[i], NULL, hammer, &s), 0);
    for (i = 0; i < THREADS; ++i) pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&s.failures), 0);
    if (tfd()) {
        assert_true(tfd()->tfd_live(TFD_STREAMS) <= 7);
        assert_int_equal(tfd()->tfd_calls("cuStreamCreate"), tfd()->tfd_live(TFD_STREAMS));
    }
    assert_ok(tf_runtime_release(s.rt[0]));
    assert_ok(tf_runtime_release(s.rt[1]));
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_STREAMS), 0);
}

struct race {
    tf_runtime *rt;
    pthread_barrier_t start;
    void *stream[THREADS];
};

static void *first_use(void *arg) {
    struct race *r = arg;
    int32_t slot = 0;
    int ok;
    /* a failure leaves a NULL stream, which the test asserts against */
    ok = tf_runtime_current_slot(r->rt, &slot) == TF_OK && slot >= 0 && slot < THREADS;
    pthread_barrier_wait(&r->start);
    if (ok && tf_runtime_slot_stream(r->rt, 0, &r->stream[slot]) != TF_OK) r->stream[slot] = NULL;
    return NULL;
}

/* Threads racing for the first use of one slot all get the one stream.  They
 * set off together; on the double, the first to create the stream stays
 * inside cuStreamCreate a while, so the others all find no stream yet and
 * queue up behind it: each must then find the one it made, not make its
 * own (and leak it). */
static void racing_first_use_creates_one_stream(void **state) {
    struct race r;
    pthread_t t[THREADS];
    int i;
    (void)state;
    memset(&r, 0, sizeof r);
    r.rt = new_runtime_with_slots(THREADS);
    assert_int_equal(pthread_barrier_init(&r.start, NULL, THREADS), 0);
    if (tfd()) tfd()->tfd_set_entry_delay_us("cuStreamCreate", 50000);
    for (i = 0; i < THREADS; ++i) assert_int_equal(pthread_create(&t[i], NULL, first_use, &r), 0);
    for (i = 0; i < THREADS; ++i) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&r.start);
    /* Each thread stored under its own slot number: all 16 answered, alike. */
    for (i = 0; i < THREADS; ++i) {
        assert_non_null(r.stream[i]);
        assert_ptr_equal(r.stream[i], r.stream[0]);
    }
    if (tfd()) {
        assert_int_equal(tfd()->tfd_calls("cuStreamCreate"), 1);
        assert_int_equal(tfd()->tfd_live(TFD_STREAMS), 1);
    }
    assert_ok(tf_runtime_release(r.rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(threads_share_runtimes),
        TF_TEST(racing_first_use_creates_one_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
