/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Ordering the library promises, made observable by the double's deferred
 * streams (work runs only when its stream is made to progress):
 *  - tf_slot_wait and tf_event_record / tf_event_wait order work of one
 *    slot after work queued on another, without the host waiting, and only
 *    up to the work queued before the call;
 *  - tf_workspace_retire releases only once the slot's stream has run the
 *    work queued before the retirement;
 *  - a page-locked upload source may be reused when tf_upload returns;
 *  - a staged download hands a staging buffer back to the device only once
 *    the host copied it out (with the double's background thread running
 *    device work as soon as it is queued).
 * The tests that do not need the double also run on a GPU, where they check
 * the same results without looking at the queues. */
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"
#include "support/transfer_support.h"

enum { N = 256 };

/* Two handles of one runtime, bound to slots 0 (the producer) and 1. */
struct slots {
    tf_runtime *rt, *a, *b;
    void *stream_a, *stream_b;
    uint64_t buf, out;
};

static void open_slots(struct slots *s) {
    s->rt = new_runtime_with_slots(2);
    assert_ok(tf_runtime_bind_slot(s->rt, 0, &s->a));
    assert_ok(tf_runtime_bind_slot(s->rt, 1, &s->b));
    assert_ok(tf_runtime_stream(s->a, &s->stream_a));
    assert_ok(tf_runtime_stream(s->b, &s->stream_b));
    s->buf = lib_alloc(s->a, N);
    s->out = lib_alloc(s->b, N);
    /* Both allocations are complete before either slot uses them. */
    assert_ok(tf_runtime_sync(s->a));
    assert_ok(tf_runtime_sync(s->b));
    queue_memset(s->a, s->buf, 0x11, N);
    queue_memset(s->b, s->out, 0x22, N);
    assert_ok(tf_runtime_sync(s->a));
    assert_ok(tf_runtime_sync(s->b));
}

static void close_slots(struct slots *s) {
    lib_free(s->a, s->buf);
    lib_free(s->b, s->out);
    assert_ok(tf_runtime_release(s->a));
    assert_ok(tf_runtime_release(s->b));
    assert_ok(tf_runtime_release(s->rt));
}

static unsigned long pending(void *stream) { return tfd() ? tfd()->tfd_pending(stream) : 0; }

/* Every byte of the N bytes at `dev`, read on slot b, equals `value`. */
static void expect_bytes(struct slots *s, uint64_t dev, unsigned char value) {
    unsigned char host[N], want[N];
    memset(want, value, N);
    assert_ok(tf_download(s->b, dev, host, N));
    assert_memory_equal(host, want, N);
}

/* As expect_bytes, for a copy ordered after a write `waited` that slot a
 * follows with a write `later` nothing waits for.  The double runs slot a
 * only as far as the wait, so out holds exactly `waited`.  On a GPU slot a
 * runs on by itself and `later` may land before or during the copy: every
 * byte is one of the two, never the value from before the waited-for
 * write. */
static void expect_waited_bytes(struct slots *s, uint64_t dev, unsigned char waited,
                                unsigned char later) {
    unsigned char host[N];
    int i;
    if (tfd()) {
        expect_bytes(s, dev, waited);
        return;
    }
    assert_ok(tf_download(s->b, dev, host, N));
    for (i = 0; i < N; ++i) assert_true(host[i] == waited || host[i] == later);
}

/* Slot a writes buf; slot b waits for slot a, copies buf to out and is
 * synchronized alone: out holds what slot a wrote before the wait, not what
 * it wrote after. */
static void slot_wait_orders_the_other_slots_work(void **state) {
    struct slots s;
    unsigned long before;
    (void)state;
    open_slots(&s);
    queue_memset(s.a, s.buf, 0x5A, N);
    before = pending(s.stream_a);
    assert_ok(tf_slot_wait(s.b, 0));
    assert_true(pending(s.stream_a) >= before); /* nothing ran: the host did not wait */
    queue_memset(s.a, s.buf, 0x77, N);          /* after the wait: not waited for */
    assert_ok(tf_copy(s.b, s.buf, s.out, N));
    assert_ok(tf_runtime_sync(s.b));
    expect_waited_bytes(&s, s.out, 0x5A, 0x77);
    if (tfd()) assert_int_equal(pending(s.stream_a), 1); /* slot a ran up to the wait */
    assert_ok(tf_runtime_sync(s.a));
    close_slots(&s);
}

/* The same through a tf_event: recorded on slot a, waited for on slot b. */
static void event_wait_orders_the_recorded_work(void **state) {
    struct slots s;
    tf_event *e = NULL;
    int32_t done = -1;
    (void)state;
    open_slots(&s);
    assert_ok(tf_event_new(s.rt, &e));
    queue_memset(s.a, s.buf, 0x3C, N);
    assert_ok(tf_event_record(s.a, e));
    queue_memset(s.a, s.buf, 0x44, N);
    if (tfd()) {
        assert_ok(tf_event_query(e, &done));
        assert_int_equal(done, 0); /* slot a has not run the record yet */
    }
    assert_ok(tf_event_wait(s.b, e));
    assert_ok(tf_copy(s.b, s.buf, s.out, N));
    assert_ok(tf_runtime_sync(s.b));
    expect_waited_bytes(&s, s.out, 0x3C, 0x44);
    assert_ok(tf_event_query(e, &done));
    assert_int_equal(done, 1);
    if (tfd()) assert_int_equal(pending(s.stream_a), 1); /* the second memset */
    /* tf_event_synchronize waits for the record only */
    assert_ok(tf_event_record(s.a, e));
    queue_memset(s.a, s.buf, 0x55, N);
    assert_ok(tf_event_synchronize(e));
    if (tfd()) assert_int_equal(pending(s.stream_a), 1);
    assert_ok(tf_runtime_sync(s.a));
    expect_bytes(&s, s.buf, 0x55);
    assert_ok(tf_event_release(e));
    close_slots(&s);
}

/* ---- retirement ------------------------------------------------------------ */

static struct {
    int released;
    unsigned char seen; /* buf's first byte when the release ran */
    uint64_t buf;
} g;

/* Notes buf's first byte as the device left it when the release runs. */
static void release(void *resource, void *user_data) {
    (void)resource;
    (void)user_data;
    g.released++;
    tfd()->tfd_device_read(g.buf, &g.seen, 1);
}

/* A retirement after work on a slot is released only once that slot's
 * stream has run the work; work on another slot does not release it. */
static void retirement_waits_for_the_work_before_it(void **state) {
    struct slots s;
    (void)state;
    REQUIRE_DOUBLE();
    open_slots(&s);
    memset(&g, 0, sizeof g);
    g.buf = s.buf;
    queue_memset(s.a, s.buf, 0x66, N);
    assert_ok(tf_workspace_retire(s.a, NULL, release, NULL));
    assert_ok(tf_workspace_poll(s.rt));
    assert_int_equal(g.released, 0);
    assert_int_equal(pending(s.stream_a), 2); /* the memset and the retirement's record */
    /* slot b's progress is not slot a's */
    assert_ok(tf_runtime_sync(s.b));
    assert_ok(tf_workspace_poll(s.rt));
    assert_int_equal(g.released, 0);
    /* the memset alone is not enough: the record comes after it */
    assert_int_equal(tfd()->tfd_step(s.stream_a, 1), 1);
    assert_ok(tf_workspace_poll(s.rt));
    assert_int_equal(g.released, 0);
    assert_int_equal(tfd()->tfd_step(s.stream_a, 1), 1);
    assert_ok(tf_workspace_poll(s.rt));
    assert_int_equal(g.released, 1);
    assert_int_equal(g.seen, 0x66); /* the work ran before the release */
    close_slots(&s);
}

/* ---- page-locked uploads ------------------------------------------------------ */

/* tf_upload waits for a page-locked source: reusing it at once is safe. */
static void page_locked_upload_source_is_free_on_return(void **state) {
    struct slots s;
    unsigned char *src;
    (void)state;
    open_slots(&s);
    src = pinned_alloc(s.b, N);
    memset(src, 0x29, N);
    assert_ok(tf_upload(s.b, src, s.out, N));
    memset(src, 0x30, N); /* reused as soon as the call returned */
    expect_bytes(&s, s.out, 0x29);
    pinned_free(s.b, src);
    close_slots(&s);
}

/* ---- the device running alongside the host ---------------------------------- */

/* A staged download reuses its page-locked buffers while the double's
 * background thread runs the device copies as soon as they are queued: a
 * buffer handed back to the device before the host copied it out shows as
 * wrong bytes (most of the time: the two race, as on a GPU). */
static void staged_download_with_the_device_running_alongside(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    const size_t n = 24 * ((size_t)1 << 20) + 5;
    tf_runtime *rt;
    unsigned char *host = malloc(n);
    uint64_t d;
    int round;
    assert_non_null(host);
    rt = runtime_with(1, 4, 256 << 10);
    d = lib_alloc(rt, n);
    fill_pattern(host, n, 81);
    assert_ok(tf_upload(rt, host, d, n));
    tfd()->tfd_set_background_delay_us(0);
    tfd()->tfd_set_execution(TFD_EXEC_BACKGROUND);
    for (round = 0; round < 4; ++round) {
        memset(host, 0, n);
        assert_ok(tf_download(rt, d, host, n));
        assert_pattern(host, n, 81);
    }
    tfd()->tfd_set_execution(TFD_EXEC_DEFERRED);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(host);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(slot_wait_orders_the_other_slots_work),
        TF_TEST(event_wait_orders_the_recorded_work),
        TF_TEST(retirement_waits_for_the_work_before_it),
        TF_TEST(page_locked_upload_source_is_free_on_return),
        TF_TEST(staged_download_with_the_device_running_alongside),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
