/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Any library's work on the slot streams (tf_stream_enqueue) and ordering
 * between slots (tf_slot_wait, tf_event): the right stream and context, the
 * caller's context back, events instead of device-wide waits, and a consumer
 * thread that sees a producer thread's data (on the double and on a GPU). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support/raw_memory.h"
#include "support/test_support.h"

struct seen {
    void *stream, *context;
    int calls;
    int32_t ret;
};

static int32_t record(void *stream, void *user_data) {
    struct seen *s = user_data;
    s->stream = stream;
    s->context = raw_current_context();
    s->calls++;
    return s->ret;
}

/* ---- tf_stream_enqueue ------------------------------------------------- */

static void enqueue_runs_on_the_slot_stream(void **state) {
    tf_runtime *rt = new_runtime_with_slots(2), *s1 = NULL;
    void *other = raw_create_context(), *primary = NULL, *stream = NULL;
    struct seen s;
    (void)state;
    memset(&s, 0, sizeof s);
    assert_ok(tf_runtime_primary_context(rt, &primary));
    assert_ok(tf_runtime_bind_slot(rt, 1, &s1));
    raw_set_current_context(other);
    assert_ok(tf_stream_enqueue(s1, record, &s));
    assert_ptr_equal(raw_current_context(), other);
    assert_int_equal(s.calls, 1);
    assert_ptr_equal(s.context, primary);
    assert_ok(tf_runtime_slot_stream(rt, 1, &stream));
    assert_ptr_equal(s.stream, stream);
    s.ret = 42;
    assert_failure(tf_stream_enqueue(s1, record, &s), TF_ERROR_CALLBACK, "tf_stream_enqueue",
                   "callback returned 42");
    assert_int_equal(tf_last_error_code(), 42);
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_CALLBACK);
    assert_ptr_equal(raw_current_context(), other);
    assert_failure(tf_stream_enqueue(s1, NULL, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_stream_enqueue", "fn is NULL");
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(s1));
    assert_ok(tf_runtime_release(rt));
}

static void enqueue_stream_creation_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct seen s;
    memset(&s, 0, sizeof s);
    INJECT("cuStreamCreate", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_stream_enqueue(rt, record, &s), TF_ERROR_OUT_OF_MEMORY, "tf_stream_enqueue",
                   "cuStreamCreate failed");
    assert_int_equal(s.calls, 0);
    assert_null(raw_current_context());
    assert_ok(tf_stream_enqueue(rt, record, &s));
    assert_int_equal(s.calls, 1);
    assert_ok(tf_runtime_release(rt));
}

static int32_t reenter_stream(void *stream, void *user_data) {
    tf_runtime *rt = user_data;
    (void)stream;
    return tf_stream_enqueue(rt, record, NULL) == TF_ERROR_RUNTIME_STATE ? 0 : 1;
}

static void enqueue_reentry_is_refused(void **state) {
    tf_runtime *rt = new_runtime();
    (void)state;
    assert_ok(tf_stream_enqueue(rt, reenter_stream, rt));
    assert_ok(tf_runtime_release(rt));
}

/* ---- tf_slot_wait ---------------------------------------------------------- */

static void slot_wait_uses_one_event_per_slot(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime_with_slots(3), *s0 = NULL;
    void *stream1 = NULL;
    char log[256];
    long events;
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_slot_stream(rt, 1, &stream1));
    events = tfd()->tfd_live(TFD_EVENTS);
    tfd()->tfd_log_clear();
    /* Slot 2 never made a stream, and slot 0 is our own: nothing to wait for. */
    assert_ok(tf_slot_wait(s0, 2));
    assert_ok(tf_slot_wait(s0, 0));
    assert_int_equal(tfd()->tfd_log_count(), 0);
    assert_ok(tf_slot_wait(s0, 1));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log,
                        "cuCtxGetCurrent,cuCtxSetCurrent,cuStreamCreate,cuEventCreate,"
                        "cuEventRecord,cuStreamWaitEvent,cuCtxSetCurrent");
    tfd()->tfd_log_clear();
    assert_ok(tf_slot_wait(s0, 1));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log,
                        "cuCtxGetCurrent,cuCtxSetCurrent,cuEventRecord,cuStreamWaitEvent,"
                        "cuCtxSetCurrent");
    assert_int_equal(tfd()->tfd_live(TFD_EVENTS), events + 1);
    assert_null(raw_current_context());
    assert_failure(tf_slot_wait(s0, 3), TF_ERROR_INVALID_ARGUMENT, "tf_slot_wait",
                   "other_slot 3 is outside 0..2");
    assert_failure(tf_slot_wait(s0, -1), TF_ERROR_INVALID_ARGUMENT, "tf_slot_wait", "outside");
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(tfd()->tfd_live(TFD_EVENTS), events);
}

static void check_slot_wait_failure(const char *entry) {
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL;
    void *stream = NULL, *other = raw_create_context();
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_slot_stream(rt, 0, &stream));
    assert_ok(tf_runtime_slot_stream(rt, 1, &stream));
    raw_set_current_context(other);
    INJECT(entry, 1, CUDA_ERROR_INVALID_VALUE, 1);
    assert_failure(tf_slot_wait(s0, 1), TF_ERROR_CUDA, "tf_slot_wait", entry,
                   "CUDA_ERROR_INVALID_VALUE (1)");
    assert_string_equal(tf_last_error_call(), entry);
    assert_ptr_equal(raw_current_context(), other);
    assert_ok(tf_slot_wait(s0, 1));
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(rt));
}

static void slot_wait_failures(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_slot_wait_failure("cuEventCreate");
    check_slot_wait_failure("cuEventRecord");
    check_slot_wait_failure("cuStreamWaitEvent");
}

/* ---- tf_event ------------------------------------------------------------ */

static void event_lifecycle(void **state) {
    tf_runtime *rt = new_runtime();
    tf_event *e = NULL;
    int32_t done = -1;
    void *stream = NULL;
    long events = tfd() ? tfd()->tfd_live(TFD_EVENTS) : 0;
    (void)state;
    assert_ok(tf_event_new(rt, &e));
    assert_non_null(e);
    assert_ok(tf_event_query(e, &done)); /* never recorded: done */
    assert_int_equal(done, 1);
    assert_ok(tf_event_wait(rt, e));
    assert_ok(tf_event_synchronize(e));
    assert_ok(tf_event_record(rt, e));
    assert_ok(tf_event_synchronize(e));
    assert_ok(tf_event_query(e, &done));
    assert_int_equal(done, 1);
    assert_ok(tf_event_retain(e));
    assert_ok(tf_event_release(e));
    assert_null(raw_current_context());
    if (tfd()) {
        assert_int_equal(tfd()->tfd_live(TFD_EVENTS), events + 1);
        /* Pending until its stream is synchronized. */
        tfd()->tfd_set_async_pending(1);
        assert_ok(tf_event_record(rt, e));
        assert_ok(tf_event_query(e, &done));
        assert_int_equal(done, 0);
        assert_ok(tf_runtime_sync(rt));
        assert_ok(tf_event_query(e, &done));
        assert_int_equal(done, 1);
        tfd()->tfd_set_async_pending(0);
    }
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_ok(tf_event_release(e));
    assert_ok(tf_event_release(NULL));
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_EVENTS), events);
    assert_ok(tf_runtime_release(rt));
}

/* The event holds its runtime: the runtime goes with the event's release. */
static void event_keeps_its_runtime_alive(void **state) {
    tf_runtime *rt = new_runtime();
    tf_event *e = NULL;
    (void)state;
    assert_ok(tf_event_new(rt, &e));
    assert_ok(tf_event_record(rt, e));
    assert_ok(tf_runtime_release(rt));
    if (tfd()) assert_int_equal(tfd()->tfd_primary_refcount(0), 1);
    assert_ok(tf_event_synchronize(e));
    assert_ok(tf_event_release(e));
    if (tfd()) assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
}

static void event_bad_arguments(void **state) {
    tf_runtime *rt = new_runtime();
    tf_event *e = NULL;
    uint64_t junk[8];
    int32_t done = 0;
    (void)state;
    memset(junk, 0, sizeof junk);
    assert_failure(tf_event_new(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_event_new", "NULL");
    assert_failure(tf_event_record(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_event_record",
                   "event is NULL");
    assert_failure(tf_event_wait(rt, (tf_event *)junk), TF_ERROR_INVALID_ARGUMENT, "tf_event_wait",
                   "is not a live event");
    assert_failure(tf_event_synchronize(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_event_synchronize",
                   "event is NULL");
    assert_failure(tf_event_query((tf_event *)junk, &done), TF_ERROR_INVALID_ARGUMENT,
                   "tf_event_query", "is not a live event");
    assert_failure(tf_event_retain(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_event_retain", "NULL");
    assert_failure(tf_event_release((tf_event *)junk), TF_ERROR_INVALID_ARGUMENT,
                   "tf_event_release", "is not a live event");
    assert_ok(tf_event_new(rt, &e));
    assert_failure(tf_event_query(e, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_event_query",
                   "out_done is NULL");
    assert_ok(tf_event_release(e));
    assert_ok(tf_runtime_release(rt));
}

static void event_of_another_device_is_not_recorded(void **state) {
    tf_runtime *rt0 = NULL, *rt1 = NULL;
    tf_event *e = NULL;
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_devices(2);
    assert_ok(tf_runtime_new(0, &rt0));
    assert_ok(tf_runtime_new(1, &rt1));
    assert_ok(tf_event_new(rt0, &e));
    assert_failure(tf_event_record(rt1, e), TF_ERROR_INVALID_ARGUMENT, "tf_event_record",
                   "belongs to device 0, the runtime to device 1");
    assert_ok(tf_event_record(rt0, e));
    assert_ok(tf_event_wait(rt1, e)); /* waits across devices are fine */
    assert_ok(tf_event_release(e));
    assert_ok(tf_runtime_release(rt0));
    assert_ok(tf_runtime_release(rt1));
}

static void event_failures(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    tf_event *e = NULL;
    int32_t done = 7;
    void *other = raw_create_context(), *primary = NULL;
    const char *warnings;
    raw_set_current_context(other);
    INJECT("cuEventCreate", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_event_new(rt, &e), TF_ERROR_OUT_OF_MEMORY, "tf_event_new",
                   "cuEventCreate failed");
    assert_null(e);
    assert_ok(tf_event_new(rt, &e));
    INJECT("cuEventRecord", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    assert_failure(tf_event_record(rt, e), TF_ERROR_CUDA, "tf_event_record",
                   "cuEventRecord failed: CUDA_ERROR_INVALID_HANDLE (400)");
    INJECT("cuStreamWaitEvent", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    assert_failure(tf_event_wait(rt, e), TF_ERROR_CUDA, "tf_event_wait", "cuStreamWaitEvent");
    INJECT("cuEventQuery", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    assert_failure(tf_event_query(e, &done), TF_ERROR_CUDA, "tf_event_query", "cuEventQuery");
    assert_int_equal(done, 7);
    assert_ptr_equal(raw_current_context(), other);
    /* A destroy failure at the last release is logged, not returned, and
     * leaves the thread's last error alone. */
    INJECT("cuEventDestroy", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    log_capture_start();
    assert_ok(tf_event_release(e));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "tf_event_release: cuEventDestroy failed"));
    assert_string_equal(tf_last_error_operation(), "tf_event_query");
    assert_ptr_equal(raw_current_context(), other);
    /* A sticky fault seen by a synchronize marks the runtime unusable; the
     * event's release then leaks it quietly. */
    assert_ok(tf_event_new(rt, &e));
    assert_ok(tf_runtime_primary_context(rt, &primary));
    tfd()->tfd_poison_context(primary, CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_failure(tf_event_synchronize(e), TF_ERROR_DEVICE_FAULT, "tf_event_synchronize",
                   "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    assert_failure(tf_runtime_sync(rt), TF_ERROR_DEVICE_FAULT, "tf_runtime_sync", "unusable");
    tfd()->tfd_log_clear();
    log_capture_start();
    assert_ok(tf_event_release(e));
    warnings = log_capture_stop();
    assert_string_equal(warnings, "");
    assert_int_equal(tfd()->tfd_log_count(), 0); /* no cuEventDestroy, no context switch */
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
}

/* ---- a producer thread and a consumer thread ---------------------------- */

enum { WORDS = 4 << 20 }; /* 16 MiB: long enough for a real copy to be in flight */

struct exchange {
    tf_runtime *rt;
    uint64_t buffer;
    uint32_t *data;  /* producer's source */
    uint32_t *seen;  /* consumer's destination */
    tf_event *event; /* NULL: use tf_slot_wait on the producer's slot */
    int32_t producer_slot;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int produced;
};

static void *producer(void *arg) {
    struct exchange *x = arg;
    tf_runtime *me = NULL;
    assert_ok(tf_runtime_bind_slot(x->rt, x->producer_slot, &me));
    dev_upload_async(me, x->buffer, x->data, (size_t)WORDS * 4);
    if (x->event) assert_ok(tf_event_record(me, x->event));
    pthread_mutex_lock(&x->lock);
    x->produced = 1;
    pthread_cond_signal(&x->cond);
    pthread_mutex_unlock(&x->lock);
    assert_ok(tf_runtime_release(me)); /* no sync: the consumer orders itself */
    return NULL;
}

static void *consumer(void *arg) {
    struct exchange *x = arg;
    tf_runtime *me = NULL;
    assert_ok(tf_runtime_bind_slot(x->rt, x->producer_slot + 1, &me));
    pthread_mutex_lock(&x->lock);
    while (!x->produced) pthread_cond_wait(&x->cond, &x->lock);
    pthread_mutex_unlock(&x->lock);
    if (x->event)
        assert_ok(tf_event_wait(me, x->event));
    else
        assert_ok(tf_slot_wait(me, x->producer_slot));
    dev_download_async(me, x->seen, x->buffer, (size_t)WORDS * 4);
    assert_ok(tf_runtime_sync(me)); /* waits for the consumer's slot only */
    assert_ok(tf_runtime_release(me));
    return NULL;
}

static void exchange_through(int use_event, uint32_t salt) {
    struct exchange x;
    pthread_t p, c;
    size_t i;
    memset(&x, 0, sizeof x);
    x.rt = new_runtime_with_slots(4);
    x.producer_slot = 1;
    x.data = malloc((size_t)WORDS * 4);
    x.seen = malloc((size_t)WORDS * 4);
    for (i = 0; i < WORDS; ++i) x.data[i] = (uint32_t)i * 2654435761u ^ salt;
    memset(x.seen, 0, (size_t)WORDS * 4);
    x.buffer = dev_alloc(x.rt, (size_t)WORDS * 4);
    dev_upload(x.rt, x.buffer, x.seen, (size_t)WORDS * 4); /* zeros first */
    if (use_event) assert_ok(tf_event_new(x.rt, &x.event));
    pthread_mutex_init(&x.lock, NULL);
    pthread_cond_init(&x.cond, NULL);
    pthread_create(&c, NULL, consumer, &x);
    pthread_create(&p, NULL, producer, &x);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    for (i = 0; i < WORDS; ++i)
        if (x.seen[i] != x.data[i])
            fail_msg("word %zu: consumer saw 0x%08x, producer wrote 0x%08x", i, x.seen[i],
                     x.data[i]);
    if (x.event) assert_ok(tf_event_release(x.event));
    dev_free(x.rt, x.buffer);
    pthread_mutex_destroy(&x.lock);
    pthread_cond_destroy(&x.cond);
    free(x.data);
    free(x.seen);
    assert_ok(tf_runtime_release(x.rt));
}

static void consumer_sees_producer_data_through_an_event(void **state) {
    (void)state;
    exchange_through(1, 0x5a5a0001u);
}

static void consumer_sees_producer_data_through_slot_wait(void **state) {
    (void)state;
    exchange_through(0, 0xa5a50002u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(enqueue_runs_on_the_slot_stream),
        TF_TEST(enqueue_stream_creation_failure),
        TF_TEST(enqueue_reentry_is_refused),
        TF_TEST(slot_wait_uses_one_event_per_slot),
        TF_TEST(slot_wait_failures),
        TF_TEST(event_lifecycle),
        TF_TEST(event_keeps_its_runtime_alive),
        TF_TEST(event_bad_arguments),
        TF_TEST(event_of_another_device_is_not_recorded),
        TF_TEST(event_failures),
        TF_TEST(consumer_sees_producer_data_through_an_event),
        TF_TEST(consumer_sees_producer_data_through_slot_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
