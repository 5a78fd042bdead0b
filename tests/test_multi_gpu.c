/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Several devices in one process: runtimes on two devices used from the
 * same threads, the caller's exact context restored across devices, no
 * primary context on a device nobody asked for (checked in fresh
 * processes), peer availability per ordered pair as the driver answers it,
 * peer copies ordered after the source slot's work, peer access set up
 * again for a destination context created anew, addresses of the other
 * device refused, a memory pool per device, page-locked blocks of one
 * device's runtime used by the other's copies, and scalar reads on both devices
 * from threads at once.
 *
 * Against the double the process sees two devices (tfd_set_devices); on a
 * GPU machine the tests need two GPUs and skip with one. */
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/raw_memory.h"
#include "support/test_support.h"
#include "support/transfer_support.h"

/* ---- two devices --------------------------------------------------------- */

/* Whether the process sees two devices; the double is given two, with
 * direct access both ways unless a test says otherwise. */
static int have_two_devices(void) {
    int32_t n = 0;
    if (tfd()) {
        tfd()->tfd_set_devices(2);
        tfd()->tfd_set_peer_access(0, 1, 1);
        tfd()->tfd_set_peer_access(1, 0, 1);
    }
    return tf_device_count(&n) == TF_OK && n >= 2;
}

#define REQUIRE_TWO_DEVICES()                                    \
    do {                                                         \
        if (!have_two_devices()) {                               \
            print_message("    (needs two devices: skipped)\n"); \
            skip();                                              \
        }                                                        \
    } while (0)

struct pair {
    tf_runtime *rt[2];
    void *ctx[2];
};

static void open_pair(struct pair *p) {
    int d;
    for (d = 0; d < 2; ++d) {
        p->rt[d] = NULL;
        assert_ok(tf_runtime_new(d, &p->rt[d]));
        assert_ok(tf_runtime_primary_context(p->rt[d], &p->ctx[d]));
    }
    assert_ptr_not_equal(p->ctx[0], p->ctx[1]);
}

static void close_pair(struct pair *p) {
    assert_ok(tf_runtime_release(p->rt[1]));
    assert_ok(tf_runtime_release(p->rt[0]));
}

/* ---- the raw driver, whichever is loaded ---------------------------------- */

/* Whether device `ordinal`'s primary context is active (1 or 0), from the
 * loaded driver's cuDevicePrimaryCtxGetState; -1 if it cannot be asked. */
static int primary_active(int ordinal) {
    PFN_cuDeviceGet_v2000 get;
    PFN_cuDevicePrimaryCtxGetState_v7000 get_state;
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = -1;
    *(void **)&get = raw_driver_entry("cuDeviceGet", 2000);
    *(void **)&get_state = raw_driver_entry("cuDevicePrimaryCtxGetState", 7000);
    if (!get || !get_state || get(&dev, ordinal) != CUDA_SUCCESS ||
        get_state(dev, &flags, &active) != CUDA_SUCCESS)
        return -1;
    return active;
}

/* cuDeviceCanAccessPeer(from, to) as the driver answers it; -1 on error. */
static int raw_can_access(int from, int to) {
    PFN_cuDeviceCanAccessPeer_v4000 can;
    int yes = -1;
    *(void **)&can = raw_driver_entry("cuDeviceCanAccessPeer", 4000);
    if (!can || can(&yes, from, to) != CUDA_SUCCESS) return -1;
    return yes;
}

struct probe {
    void *peer;
    CUresult result;
};

static int32_t enable_peer(void *arg) {
    struct probe *p = arg;
    PFN_cuCtxEnablePeerAccess_v4000 enable;
    *(void **)&enable = raw_driver_entry("cuCtxEnablePeerAccess", 4000);
    p->result = enable ? enable((CUcontext)p->peer, 0) : CUDA_ERROR_NOT_FOUND;
    return 0;
}

/* What cuCtxEnablePeerAccess answers from rt's primary context to `peer`:
 * CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED when the library set it up. */
static CUresult probe_peer_access(tf_runtime *rt, void *peer) {
    struct probe p = {peer, CUDA_ERROR_UNKNOWN};
    assert_ok(tf_with_context(rt, enable_peer, &p));
    return p.result;
}

/* Work queued on a slot stream through tf_stream_enqueue: on a real GPU
 * first a host function that holds the stream for `gate_ms` (so that a
 * copy not ordered after this work would visibly run early), then
 * cuMemsetD8Async(dst, value, n).  The double's streams run only when made
 * to, so a copy not ordered after this work shows without a gate: there it
 * is left out. */
struct fill {
    uint64_t dst;
    size_t n;
    unsigned char value;
    unsigned gate_ms;
};

static void CUDA_CB hold_stream(void *ms) { usleep((useconds_t)(uintptr_t)ms * 1000u); }

static int32_t gate_and_fill(void *stream, void *arg) {
    const struct fill *f = arg;
    PFN_cuMemsetD8Async_v3020 set;
    PFN_cuLaunchHostFunc_v10000 host;
    CUresult r;
    *(void **)&set = raw_driver_entry("cuMemsetD8Async", 3020);
    *(void **)&host = raw_driver_entry("cuLaunchHostFunc", 10000);
    if (!set) return -1;
    if (f->gate_ms && host && !tfd() &&
        (r = host((CUstream)stream, hold_stream, (void *)(uintptr_t)f->gate_ms)) != CUDA_SUCCESS)
        return (int32_t)r;
    return (int32_t)set((CUdeviceptr)f->dst, f->value, f->n, (CUstream)stream);
}

/* Index of the first byte of p[0..n) that is not `value`, or n. */
static size_t first_not(const unsigned char *p, size_t n, unsigned char value) {
    size_t i;
    for (i = 0; i < n; ++i)
        if (p[i] != value) return i;
    return n;
}
#define assert_all(p, n, value) assert_int_equal(first_not((p), (n), (value)), (n))

/* Large enough on a GPU that a copy racing the gate would be caught. */
static size_t test_bytes(void) { return tfd() ? ((size_t)1 << 20) + 13 : ((size_t)64 << 20) + 13; }

/* ---- fresh processes: which primary contexts exist --------------------- */

static void scenario_devices(void) {
    if (tfd()) tfd()->tfd_set_devices(2);
}

/* tf_device_count and tf_device_info on every device create no context. */
static int child_discovery(void) {
    int32_t n = 0, i;
    scenario_devices();
    SCENARIO_CHECK(tf_device_count(&n) == TF_OK && n >= 2);
    for (i = 0; i < n; ++i) {
        tf_device_properties p;
        tf_device_properties_init(&p, sizeof p);
        SCENARIO_CHECK(tf_device_info(i, &p) == TF_OK && p.ordinal == i);
    }
    for (i = 0; i < n; ++i) SCENARIO_CHECK(primary_active(i) == 0);
    SCENARIO_CHECK(raw_current_context() == NULL);
    return 0;
}

static int32_t context_is(void *expected) { return raw_current_context() == expected ? 0 : 1; }

/* Only device `keep` may have an active primary context. */
static int others_inactive(int32_t n, int keep) {
    int32_t i;
    for (i = 0; i < n; ++i)
        if (i != keep && primary_active(i) != 0) {
            fprintf(stderr, "device %d has an active primary context\n", (int)i);
            return 0;
        }
    return 1;
}

static void release_workspace(void *resource, void *user_data) {
    (void)user_data;
    *(int *)resource = 1;
}

/* A runtime on device 1 only: created, used for everything that touches the
 * device, released.  No other device's primary context ever becomes
 * active, and device 1's is inactive again once the runtime is gone. */
static int child_device1_only(void) {
    tf_runtime *rt = NULL;
    tf_event *ev = NULL;
    void *ctx = NULL, *stream = NULL;
    const size_t n = (1 << 20) + 5;
    unsigned char *host = malloc(n);
    uint64_t p = 0, q = 0;
    static const int32_t caps[] = {TF_CAP_NATIVE_MODULES, TF_CAP_RAW_STREAM,
                                   TF_CAP_SAME_DEVICE_COPY, TF_CAP_PEER_COPY,
                                   TF_CAP_STREAM_ORDERED_ALLOC};
    int32_t count = 0, yes = 0, done = 0;
    size_t c;
    int released = 0;
    uint32_t scalar = 0;
    struct fill f;
    scenario_devices();
    SCENARIO_CHECK(host != NULL);
    SCENARIO_CHECK(tf_device_count(&count) == TF_OK && count >= 2);
    SCENARIO_CHECK(tf_runtime_new(1, &rt) == TF_OK);
    SCENARIO_CHECK(tf_runtime_primary_context(rt, &ctx) == TF_OK);
    SCENARIO_CHECK(primary_active(1) == 1 && others_inactive(count, 1));
    SCENARIO_CHECK(tf_with_context(rt, context_is, ctx) == TF_OK);
    SCENARIO_CHECK(tf_runtime_stream(rt, &stream) == TF_OK);
    for (c = 0; c < sizeof caps / sizeof caps[0]; ++c)
        SCENARIO_CHECK(tf_runtime_supports(rt, caps[c], &yes) == TF_OK);
    SCENARIO_CHECK(tf_alloc(rt, n, &p) == TF_OK && tf_alloc(rt, n, &q) == TF_OK);
    fill_pattern(host, n, 5);
    SCENARIO_CHECK(tf_upload(rt, host, p, n) == TF_OK);
    SCENARIO_CHECK(tf_copy(rt, p, q, n) == TF_OK);
    f.dst = p;
    f.n = 64;
    f.value = 0x77;
    f.gate_ms = 0;
    SCENARIO_CHECK(tf_stream_enqueue(rt, gate_and_fill, &f) == TF_OK);
    SCENARIO_CHECK(tf_event_new(rt, &ev) == TF_OK && tf_event_record(rt, ev) == TF_OK);
    SCENARIO_CHECK(tf_event_synchronize(ev) == TF_OK && tf_event_query(ev, &done) == TF_OK);
    SCENARIO_CHECK(tf_event_release(ev) == TF_OK);
    SCENARIO_CHECK(tf_download_scalar(rt, p, &scalar, sizeof scalar) == TF_OK);
    SCENARIO_CHECK(scalar == 0x77777777u);
    memset(host, 0, n);
    SCENARIO_CHECK(tf_download(rt, q, host, n) == TF_OK && pattern_mismatch(host, n, 5) == n);
    SCENARIO_CHECK(tf_workspace_retire(rt, &released, release_workspace, NULL) == TF_OK);
    SCENARIO_CHECK(tf_runtime_sync(rt) == TF_OK && released == 1);
    SCENARIO_CHECK(tf_free(rt, p) == TF_OK && tf_free(rt, q) == TF_OK);
    SCENARIO_CHECK(tf_device_count(&count) == TF_OK);
    SCENARIO_CHECK(primary_active(1) == 1 && others_inactive(count, 1));
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    SCENARIO_CHECK(others_inactive(count, -1));
    SCENARIO_CHECK(raw_current_context() == NULL);
    free(host);
    return 0;
}

static int32_t no_cublas_work(void *handle, void *stream, void *user_data) {
    (void)handle;
    (void)stream;
    (void)user_data;
    return 0;
}

/* The vendor libraries on device 1 only (loading cuBLAS and NVRTC, a
 * cuBLAS handle and its workspace): no other device's primary context
 * becomes active.  Exit 77 when cuBLAS cannot be loaded.  Device 1's state
 * after the release is printed, not checked: cuBLAS's own runtime may keep
 * it. */
static int child_device1_cublas(void) {
    tf_runtime *rt = NULL;
    int32_t count = 0, yes = 0;
    tf_status st;
    scenario_devices();
    SCENARIO_CHECK(tf_device_count(&count) == TF_OK && count >= 2);
    SCENARIO_CHECK(tf_runtime_new(1, &rt) == TF_OK);
    SCENARIO_CHECK(tf_runtime_supports(rt, TF_CAP_RUNTIME_COMPILATION, &yes) == TF_OK);
    SCENARIO_CHECK(tf_runtime_supports(rt, TF_CAP_CUBLAS, &yes) == TF_OK);
    SCENARIO_CHECK(others_inactive(count, 1));
    st = tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, no_cublas_work, NULL);
    if (st == TF_ERROR_LIBRARY_NOT_FOUND) {
        fprintf(stderr, "no cuBLAS: %s\n", tf_last_error_message());
        tf_runtime_release(rt);
        return 77;
    }
    SCENARIO_CHECK(st == TF_OK);
    SCENARIO_CHECK(tf_runtime_sync(rt) == TF_OK);
    SCENARIO_CHECK(others_inactive(count, 1));
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    SCENARIO_CHECK(others_inactive(count, 1));
    fprintf(stderr, "    device 1's primary context after the release: %s\n",
            primary_active(1) ? "active (kept by cuBLAS's runtime)" : "inactive");
    return 0;
}

static void discovery_creates_no_context_in_a_fresh_process(void **state) {
    (void)state;
    REQUIRE_TWO_DEVICES();
    assert_int_equal(run_child("discovery", NULL), 0);
}

static void runtime_on_device_1_leaves_device_0_alone(void **state) {
    (void)state;
    REQUIRE_TWO_DEVICES();
    assert_int_equal(run_child("device1_only", NULL), 0);
}

static void cublas_on_device_1_leaves_device_0_alone(void **state) {
    int rc;
    (void)state;
    REQUIRE_TWO_DEVICES();
    rc = run_child("device1_cublas", NULL);
    if (rc == 77) {
        print_message("    (cuBLAS not found: skipped)\n");
        skip();
    }
    assert_int_equal(rc, 0);
}

/* ---- contexts ---------------------------------------------------------- */

struct nest {
    struct pair *p;
    void *outer, *inner, *after_inner;
};

static int32_t inner_on_device_0(void *arg) {
    struct nest *n = arg;
    n->inner = raw_current_context();
    return 0;
}

static int32_t outer_on_device_1(void *arg) {
    struct nest *n = arg;
    n->outer = raw_current_context();
    if (tf_with_context(n->p->rt[0], inner_on_device_0, n) != TF_OK) return 1;
    n->after_inner = raw_current_context();
    return 0;
}

static int32_t fails_with_seven(void *arg) {
    (void)arg;
    return 7;
}

static int32_t stream_context_is(void *stream, void *expected) {
    (void)stream;
    return context_is(expected);
}

/* Every call on either runtime, peer copies both ways included, leaves
 * `caller` current. */
#define KEEPS(call)                                      \
    do {                                                 \
        assert_ok(call);                                 \
        assert_ptr_equal(raw_current_context(), caller); \
    } while (0)

static void calls_keep_context(struct pair *p, void *caller) {
    const size_t n = 4096 + 3;
    unsigned char host[4096 + 3];
    uint64_t a = 0, b = 0, b2 = 0;
    int32_t yes = -1;
    void *stream = NULL;
    tf_event *ev = NULL;
    struct nest nest = {p, NULL, NULL, NULL};
    raw_set_current_context(caller);
    KEEPS(tf_with_context(p->rt[1], outer_on_device_1, &nest));
    assert_ptr_equal(nest.outer, p->ctx[1]);
    assert_ptr_equal(nest.inner, p->ctx[0]);
    assert_ptr_equal(nest.after_inner, p->ctx[1]);
    assert_failure(tf_with_context(p->rt[1], fails_with_seven, NULL), TF_ERROR_CALLBACK,
                   "tf_with_context", "callback returned 7");
    assert_ptr_equal(raw_current_context(), caller);
    KEEPS(tf_runtime_stream(p->rt[1], &stream));
    KEEPS(tf_alloc(p->rt[0], n, &a));
    KEEPS(tf_alloc(p->rt[1], n, &b));
    KEEPS(tf_alloc(p->rt[1], n, &b2));
    fill_pattern(host, n, 7);
    KEEPS(tf_upload(p->rt[0], host, a, n));
    KEEPS(tf_runtime_sync(p->rt[1]));
    KEEPS(tf_peer_copy_available(p->rt[0], p->rt[1], &yes));
    KEEPS(tf_peer_copy(p->rt[0], a, p->rt[1], b, n));
    KEEPS(tf_event_new(p->rt[0], &ev));
    KEEPS(tf_event_record(p->rt[0], ev));
    KEEPS(tf_event_wait(p->rt[1], ev));
    KEEPS(tf_copy(p->rt[1], b, b2, n));
    KEEPS(tf_stream_enqueue(p->rt[1], stream_context_is, p->ctx[1]));
    KEEPS(tf_slot_wait(p->rt[1], 0));
    memset(host, 0, n);
    KEEPS(tf_download(p->rt[1], b2, host, n));
    assert_pattern(host, n, 7);
    KEEPS(tf_download_scalar(p->rt[1], b2, host, 4));
    KEEPS(tf_peer_copy(p->rt[1], b2, p->rt[0], a, n));
    KEEPS(tf_event_synchronize(ev));
    KEEPS(tf_event_query(ev, &yes));
    assert_ok(tf_event_release(ev));
    /* A refused call puts the caller's context back too. */
    assert_failure(tf_download(p->rt[1], a, host, n), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "is memory of device 0; this runtime is on device 1");
    assert_ptr_equal(raw_current_context(), caller);
    KEEPS(tf_runtime_sync(p->rt[0]));
    KEEPS(tf_runtime_sync(p->rt[1]));
    KEEPS(tf_free(p->rt[0], a));
    KEEPS(tf_free(p->rt[1], b));
    KEEPS(tf_free(p->rt[1], b2));
}

/* From no context, from either device's primary context and from another
 * context of device 0, every call on both runtimes puts the caller's exact
 * context back, nested tf_with_context across devices included; so does
 * tearing down the device 1 runtime. */
static void context_restored_across_devices(void **state) {
    struct pair p;
    void *foreign, *callers[4];
    int i;
    (void)state;
    REQUIRE_TWO_DEVICES();
    open_pair(&p);
    foreign = raw_create_context();
    callers[0] = NULL;
    callers[1] = p.ctx[0];
    callers[2] = p.ctx[1];
    callers[3] = foreign;
    for (i = 0; i < 4; ++i) calls_keep_context(&p, callers[i]);
    raw_set_current_context(foreign);
    assert_ok(tf_runtime_release(p.rt[1]));
    assert_ptr_equal(raw_current_context(), foreign);
    assert_int_equal(primary_active(1), 0);
    raw_set_current_context(NULL);
    raw_destroy_context(foreign);
    assert_ok(tf_runtime_release(p.rt[0]));
    assert_int_equal(primary_active(0), 0);
}

static int32_t count_call(void *arg) {
    ++*(int *)arg;
    return 0;
}

/* Activating device 1's context fails, outright or after it took effect:
 * the callback does not run and device 0's context is current again. */
static void failed_activation_keeps_the_other_devices_context(void **state) {
    struct pair p;
    int calls = 0;
    (void)state;
    REQUIRE_DOUBLE();
    REQUIRE_TWO_DEVICES();
    open_pair(&p);
    raw_set_current_context(p.ctx[0]);
    INJECT("cuCtxSetCurrent", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_with_context(p.rt[1], count_call, &calls), TF_ERROR_CUDA, "tf_with_context",
                   "cuCtxSetCurrent failed", "(999)");
    assert_ptr_equal(raw_current_context(), p.ctx[0]);
    INJECT_AFTER("cuCtxSetCurrent", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_peer_copy(p.rt[1], 0, p.rt[0], 0, 8), TF_ERROR_CUDA, "tf_peer_copy",
                   "cuCtxSetCurrent failed");
    assert_ptr_equal(raw_current_context(), p.ctx[0]);
    assert_int_equal(calls, 0);
    assert_ok(tf_with_context(p.rt[1], count_call, &calls));
    assert_int_equal(calls, 1);
    assert_ptr_equal(raw_current_context(), p.ctx[0]);
    raw_set_current_context(NULL);
    close_pair(&p);
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    assert_int_equal(tfd()->tfd_primary_refcount(1), 0);
}

/* ---- peer availability ---------------------------------------------------- */

/* Per ordered pair, tf_peer_copy_available says what cuDeviceCanAccessPeer
 * says; 1 for two runtimes of one device.  The double is made asymmetric
 * (0 reaches 1, 1 does not reach 0) so that a swapped pair shows. */
static void availability_matches_the_driver_per_pair(void **state) {
    struct pair p;
    tf_runtime *again = NULL;
    int32_t yes = -1;
    int from, to;
    (void)state;
    REQUIRE_TWO_DEVICES();
    if (tfd()) tfd()->tfd_set_peer_access(1, 0, 0);
    open_pair(&p);
    for (from = 0; from < 2; ++from)
        for (to = 0; to < 2; ++to) {
            int expected = from == to ? 1 : raw_can_access(from, to);
            assert_true(expected == 0 || expected == 1);
            yes = -1;
            assert_ok(tf_peer_copy_available(p.rt[from], p.rt[to], &yes));
            assert_int_equal(yes, expected);
        }
    if (tfd()) {
        assert_ok(tf_peer_copy_available(p.rt[0], p.rt[1], &yes));
        assert_int_equal(yes, 1);
        assert_ok(tf_peer_copy_available(p.rt[1], p.rt[0], &yes));
        assert_int_equal(yes, 0);
    }
    assert_ok(tf_runtime_new(1, &again));
    assert_ok(tf_peer_copy_available(p.rt[1], again, &yes));
    assert_int_equal(yes, 1);
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(again));
    close_pair(&p);
}

/* ---- peer copies ------------------------------------------------------- */

/* src_dev's slot holds work (gated on a GPU), then the peer copy: the copy
 * sees that work's result, whether the destination waits on the host
 * (tf_runtime_sync of the source) or on the device (an event recorded
 * after the copy, waited for on the destination's slot). */
static void copy_after_source_work(struct pair *p, int s) {
    const int d = 1 - s;
    const size_t n = test_bytes(), off_src = 3, off_dst = 5, len = n - 1000;
    unsigned char *host = malloc(n), *expect = malloc(n);
    uint64_t src = lib_alloc(p->rt[s], n), dst = lib_alloc(p->rt[d], n);
    struct fill f;
    tf_event *ev = NULL;
    assert_non_null(host);
    assert_non_null(expect);
    fill_pattern(host, n, 60 + (uint32_t)s);
    assert_ok(tf_upload(p->rt[s], host, src, n));
    assert_ok(tf_runtime_sync(p->rt[s]));
    assert_ok(tf_runtime_sync(p->rt[d])); /* dst's allocation is complete */
    f.dst = src;
    f.n = n;
    f.value = 0x5A;
    f.gate_ms = 50;
    /* The host waits for the source slot. */
    assert_ok(tf_stream_enqueue(p->rt[s], gate_and_fill, &f));
    assert_ok(tf_peer_copy(p->rt[s], src, p->rt[d], dst, n));
    assert_ok(tf_runtime_sync(p->rt[s]));
    memset(host, 0, n);
    assert_ok(tf_download(p->rt[d], dst, host, n));
    assert_all(host, n, 0x5A);
    /* The destination slot waits for an event of the source slot. */
    f.value = 0xC3;
    assert_ok(tf_event_new(p->rt[s], &ev));
    assert_ok(tf_stream_enqueue(p->rt[s], gate_and_fill, &f));
    assert_ok(tf_peer_copy(p->rt[s], src, p->rt[d], dst, n));
    assert_ok(tf_event_record(p->rt[s], ev));
    assert_ok(tf_event_wait(p->rt[d], ev));
    assert_ok(tf_download(p->rt[d], dst, host, n));
    assert_all(host, n, 0xC3);
    /* An upload queued on the source slot, then a sub-range at odd offsets:
     * exactly that range of dst changes. */
    fill_pattern(expect, n, 70 + (uint32_t)s);
    assert_ok(tf_upload(p->rt[s], expect, src, n));
    assert_ok(tf_peer_copy(p->rt[s], src + off_src, p->rt[d], dst + off_dst, len));
    assert_ok(tf_runtime_sync(p->rt[s]));
    assert_ok(tf_download(p->rt[d], dst, host, n));
    assert_all(host, off_dst, 0xC3);
    assert_memory_equal(host + off_dst, expect + off_src, len);
    assert_all(host + off_dst + len, n - off_dst - len, 0xC3);
    assert_null(raw_current_context());
    assert_ok(tf_event_release(ev));
    lib_free(p->rt[s], src);
    lib_free(p->rt[d], dst);
    free(host);
    free(expect);
}

static void peer_copy_is_ordered_after_source_work(void **state) {
    struct pair p;
    (void)state;
    REQUIRE_TWO_DEVICES();
    open_pair(&p);
    copy_after_source_work(&p, 0);
    copy_after_source_work(&p, 1);
    close_pair(&p);
}

/* Without direct access (the double's device 1 cannot reach device 0) the
 * copy is still right, and peer access is not asked for. */
static void peer_copy_without_direct_access_is_right(void **state) {
    struct pair p;
    (void)state;
    REQUIRE_DOUBLE();
    REQUIRE_TWO_DEVICES();
    tfd()->tfd_set_peer_access(1, 0, 0);
    open_pair(&p);
    copy_after_source_work(&p, 1);
    assert_int_equal(tfd()->tfd_calls("cuCtxEnablePeerAccess"), 0);
    assert_int_equal(tfd()->tfd_peer_enabled(p.ctx[1], p.ctx[0]), 0);
    close_pair(&p);
}

/* Two runtimes of device 1: a peer copy between them is within one device,
 * so its ranges must not overlap, exactly as for tf_copy; between the
 * devices there is no such check. */
static void peer_copy_overlap_is_checked_within_a_device(void **state) {
    tf_runtime *x = NULL, *y = NULL, *other = NULL;
    uint64_t a, b;
    (void)state;
    REQUIRE_TWO_DEVICES();
    assert_ok(tf_runtime_new(1, &x));
    assert_ok(tf_runtime_new(1, &y));
    assert_ok(tf_runtime_new(0, &other));
    a = lib_alloc(x, 64);
    b = lib_alloc(other, 64);
    assert_ok(tf_runtime_sync(other));
    check_overlap_boundary(x, y, a, 1);
    assert_ok(tf_peer_copy(x, a, other, b, 8));
    assert_ok(tf_peer_copy(other, b, x, a, 8));
    assert_ok(tf_runtime_sync(x));
    assert_ok(tf_runtime_sync(other));
    lib_free(x, a);
    lib_free(other, b);
    assert_ok(tf_runtime_release(other));
    assert_ok(tf_runtime_release(y));
    assert_ok(tf_runtime_release(x));
}

/* Addresses are checked against their own runtime's device: memory of the
 * other device is refused by every call before anything is queued, and
 * nothing is written.  Plain cuMemAlloc memory of a whole 2 MiB, so that
 * the driver's range for it is exactly the allocation (a pool may report a
 * larger chunk). */
static void memory_of_the_other_device_is_refused(void **state) {
    struct pair p;
    const size_t n = (size_t)2 << 20;
    unsigned char *host = malloc(n), *back = malloc(n);
    uint64_t a, b;
    uint32_t scalar = 0;
    tf_event *ev = NULL;
    (void)state;
    REQUIRE_TWO_DEVICES();
    assert_non_null(host);
    assert_non_null(back);
    open_pair(&p);
    a = dev_alloc(p.rt[0], n);
    b = dev_alloc(p.rt[1], n);
    fill_pattern(host, n, 11);
    assert_ok(tf_upload(p.rt[0], host, a, n));
    fill_pattern(host, n, 12);
    assert_ok(tf_upload(p.rt[1], host, b, n));
    assert_failure(tf_peer_copy(p.rt[0], b, p.rt[1], a, 8), TF_ERROR_INVALID_ARGUMENT,
                   "tf_peer_copy", "src 0x", "is memory of device 1; this runtime is on device 0");
    assert_failure(tf_peer_copy(p.rt[0], a, p.rt[1], a, 8), TF_ERROR_INVALID_ARGUMENT,
                   "tf_peer_copy", "dst 0x", "is memory of device 0; this runtime is on device 1");
    assert_failure(tf_peer_copy(p.rt[0], a, p.rt[1], b + 1, n), TF_ERROR_INVALID_ARGUMENT,
                   "tf_peer_copy", "dst range", "crosses the end");
    assert_failure(tf_peer_copy(p.rt[0], a, p.rt[1], b, 8 + n), TF_ERROR_INVALID_ARGUMENT,
                   "tf_peer_copy", "src range", "crosses the end");
    assert_failure(tf_copy(p.rt[0], a, b, 8), TF_ERROR_INVALID_ARGUMENT, "tf_copy", "dst 0x",
                   "is memory of device 1; this runtime is on device 0");
    assert_failure(tf_upload(p.rt[1], host, a, 8), TF_ERROR_INVALID_ARGUMENT, "tf_upload", "dst 0x",
                   "is memory of device 0; this runtime is on device 1");
    assert_failure(tf_download(p.rt[0], b, back, 8), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "src 0x", "is memory of device 1; this runtime is on device 0");
    assert_failure(tf_download_scalar(p.rt[1], a, &scalar, 4), TF_ERROR_INVALID_ARGUMENT,
                   "tf_download_scalar", "is memory of device 0; this runtime is on device 1");
    assert_failure(tf_free(p.rt[1], a), TF_ERROR_INVALID_ARGUMENT, "tf_free", "ptr 0x",
                   "is memory of device 0; this runtime is on device 1");
    assert_ok(tf_event_new(p.rt[0], &ev));
    assert_failure(tf_event_record(p.rt[1], ev), TF_ERROR_INVALID_ARGUMENT, "tf_event_record",
                   "the event belongs to device 0, the runtime to device 1");
    assert_ok(tf_event_release(ev));
    assert_null(raw_current_context());
    assert_int_equal(scalar, 0);
    assert_ok(tf_download(p.rt[0], a, back, n));
    assert_pattern(back, n, 11);
    assert_ok(tf_download(p.rt[1], b, back, n));
    assert_pattern(back, n, 12);
    dev_free(p.rt[0], a);
    dev_free(p.rt[1], b);
    close_pair(&p);
    free(host);
    free(back);
}

/* The driver finds an allocation's range from a context of its own device
 * only (the double answers so): the destination of a peer copy is checked
 * with the destination's context current, and that switch failing is
 * reported; an address another device owns is named as such even when its
 * device cannot be asked. */
static void peer_copy_checks_the_destination_from_its_context(void **state) {
    struct pair p;
    const size_t n = 256;
    unsigned char host[256], back[256];
    uint64_t a, b, foreign;
    unsigned long calls_before;
    (void)state;
    REQUIRE_DOUBLE();
    REQUIRE_TWO_DEVICES();
    open_pair(&p);
    a = lib_alloc(p.rt[0], n);
    b = lib_alloc(p.rt[1], n);
    fill_pattern(host, n, 31);
    assert_ok(tf_upload(p.rt[0], host, a, n));
    fill_pattern(host, n, 32);
    assert_ok(tf_upload(p.rt[1], host, b, n));
    /* 1st switch: to the source's context; 2nd: to the destination's. */
    INJECT("cuCtxSetCurrent", 2, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_peer_copy(p.rt[0], a, p.rt[1], b, n), TF_ERROR_CUDA, "tf_peer_copy",
                   "cuCtxSetCurrent failed", "(999)");
    assert_null(raw_current_context());
    assert_ok(tf_download(p.rt[1], b, back, n));
    assert_pattern(back, n, 32); /* nothing was queued */
    /* The library's own allocation is known to be device 0's: no driver call. */
    calls_before =
        tfd()->tfd_calls("cuMemGetAddressRange") + tfd()->tfd_calls("cuPointerGetAttribute");
    assert_failure(tf_download(p.rt[1], a, back, n), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "src 0x", "is memory of device 0; this runtime is on device 1");
    assert_int_equal(
        tfd()->tfd_calls("cuMemGetAddressRange") + tfd()->tfd_calls("cuPointerGetAttribute"),
        calls_before);
    /* Foreign memory: the driver, from device 1's context, does not know
     * it; the ordinal tells why, and a failed ordinal query says only that. */
    foreign = dev_alloc(p.rt[0], n);
    INJECT("cuPointerGetAttribute", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_download(p.rt[1], foreign, back, n), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "src 0x", "is not device memory",
                   "cuMemGetAddressRange answered CUDA_ERROR_NOT_FOUND (500)");
    assert_failure(tf_download(p.rt[1], foreign, back, n), TF_ERROR_INVALID_ARGUMENT, "tf_download",
                   "src 0x", "is memory of device 0; this runtime is on device 1");
    dev_free(p.rt[0], foreign);
    assert_ok(tf_peer_copy(p.rt[0], a, p.rt[1], b, n));
    assert_ok(tf_runtime_sync(p.rt[0]));
    assert_ok(tf_download(p.rt[1], b, back, n));
    assert_pattern(back, n, 31);
    assert_null(raw_current_context());
    lib_free(p.rt[0], a);
    lib_free(p.rt[1], b);
    close_pair(&p);
}

/* Peer access goes with the destination's primary context: once every
 * runtime of device 1 is released, that context is destroyed, and the
 * first copy to a runtime on a new one sets access up again. */
static void peer_access_is_set_up_again_for_a_new_destination_context(void **state) {
    struct pair p;
    const size_t n = 4096 + 1;
    unsigned char host[4096 + 1];
    uint64_t a, b;
    int32_t direct = 0;
    (void)state;
    REQUIRE_TWO_DEVICES();
    open_pair(&p);
    assert_ok(tf_peer_copy_available(p.rt[0], p.rt[1], &direct));
    if (!direct) {
        close_pair(&p);
        print_message("    (device 0 cannot access device 1 directly: skipped)\n");
        skip();
    }
    a = lib_alloc(p.rt[0], n);
    fill_pattern(host, n, 21);
    assert_ok(tf_upload(p.rt[0], host, a, n));
    assert_ok(tf_runtime_sync(p.rt[0]));
    for (int round = 0; round < 2; ++round) {
        if (round == 1) {
            /* A new destination runtime on a context made anew. */
            assert_ok(tf_runtime_release(p.rt[1]));
            assert_int_equal(primary_active(1), 0);
            assert_ok(tf_runtime_new(1, &p.rt[1]));
            assert_ok(tf_runtime_primary_context(p.rt[1], &p.ctx[1]));
        }
        b = lib_alloc(p.rt[1], n);
        assert_ok(tf_runtime_sync(p.rt[1]));
        assert_ok(tf_peer_copy(p.rt[0], a, p.rt[1], b, n));
        assert_ok(tf_runtime_sync(p.rt[0]));
        if (tfd()) assert_int_equal(tfd()->tfd_peer_enabled(p.ctx[0], p.ctx[1]), 1);
        assert_int_equal(probe_peer_access(p.rt[0], p.ctx[1]),
                         CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
        memset(host, 0, n);
        assert_ok(tf_download(p.rt[1], b, host, n));
        assert_pattern(host, n, 21);
        lib_free(p.rt[1], b);
    }
    if (tfd()) assert_int_equal(tfd()->tfd_calls("cuCtxEnablePeerAccess"), 2 + 2); /* + probes */
    lib_free(p.rt[0], a);
    close_pair(&p);
}

/* ---- threads ----------------------------------------------------------- */

enum { THREADS = 4, ROUNDS = 40 };

struct worker {
    struct pair *p;
    void *own; /* the context this thread keeps current */
    int index;
    int failures;
    char why[160];
};

#define WORK_CHECK(cond)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            snprintf(w->why, sizeof w->why, "line %d: %s (%s)", __LINE__, #cond, \
                     tf_last_error_message());                                   \
            ++w->failures;                                                       \
            goto done;                                                           \
        }                                                                        \
    } while (0)

/* Each round: memory on one device, a peer copy to the other and back
 * down, alternating the direction; the thread's own context stays current
 * throughout. */
static void *work_both_devices(void *arg) {
    struct worker *w = arg;
    const size_t n = (64 << 10) + (size_t)w->index * 17 + 1;
    unsigned char *host = malloc(n);
    int i;
    raw_set_current_context(w->own);
    for (i = 0; i < ROUNDS && host; ++i) {
        const int s = (w->index + i) & 1, d = 1 - s;
        const uint32_t seed = (uint32_t)(w->index * 1000 + i);
        uint64_t src = 0, dst = 0;
        WORK_CHECK(tf_alloc(w->p->rt[s], n, &src) == TF_OK);
        WORK_CHECK(tf_alloc(w->p->rt[d], n, &dst) == TF_OK);
        WORK_CHECK(tf_runtime_sync(w->p->rt[d]) == TF_OK);
        fill_pattern(host, n, seed);
        WORK_CHECK(tf_upload(w->p->rt[s], host, src, n) == TF_OK);
        WORK_CHECK(tf_peer_copy(w->p->rt[s], src, w->p->rt[d], dst, n) == TF_OK);
        WORK_CHECK(tf_runtime_sync(w->p->rt[s]) == TF_OK);
        memset(host, 0, n);
        WORK_CHECK(tf_download(w->p->rt[d], dst, host, n) == TF_OK);
        WORK_CHECK(pattern_mismatch(host, n, seed) == n);
        WORK_CHECK(tf_free(w->p->rt[s], src) == TF_OK);
        WORK_CHECK(tf_free(w->p->rt[d], dst) == TF_OK);
        WORK_CHECK(raw_current_context() == w->own);
    }
done:
    raw_set_current_context(NULL);
    free(host);
    return NULL;
}

/* Threads use both runtimes at once, each from its own current context
 * (none, either primary context, another context of device 0). */
static void threads_use_both_devices(void **state) {
    struct pair p;
    struct worker w[THREADS];
    pthread_t t[THREADS];
    void *foreign;
    int i;
    (void)state;
    REQUIRE_TWO_DEVICES();
    open_pair(&p);
    foreign = raw_create_context();
    for (i = 0; i < THREADS; ++i) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].p = &p;
        w[i].index = i;
        w[i].own = i == 0 ? NULL : i == 1 ? p.ctx[0] : i == 2 ? p.ctx[1] : foreign;
        assert_int_equal(pthread_create(&t[i], NULL, work_both_devices, &w[i]), 0);
    }
    for (i = 0; i < THREADS; ++i) pthread_join(t[i], NULL);
    for (i = 0; i < THREADS; ++i) {
        if (w[i].failures) print_error("thread %d: %s\n", i, w[i].why);
        assert_int_equal(w[i].failures, 0);
    }
    raw_destroy_context(foreign);
    close_pair(&p);
    if (tfd()) {
        assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 0);
        assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
        assert_int_equal(tfd()->tfd_primary_refcount(1), 0);
    }
}

/* ---- what 1.1 and 1.2 added, on two devices ------------------------------ */

/* Each device has its own pool, shared by that device's runtimes: an
 * allocation on one device shows in its statistics only, a second runtime
 * of device 1 reads device 1's, and the pools go with their devices' last
 * runtimes. */
static uint64_t in_use(tf_runtime *rt) {
    tf_memory_pool_stats st;
    tf_memory_pool_stats_init(&st, sizeof st);
    assert_ok(tf_memory_stats(rt, &st));
    return st.in_use_bytes;
}

static void each_device_has_its_own_pool(void **state) {
    struct pair p;
    tf_runtime *again = NULL;
    uint64_t a, b;
    uint64_t base0, base1;
    (void)state;
    REQUIRE_TWO_DEVICES();
    open_pair(&p);
    base0 = in_use(p.rt[0]);
    base1 = in_use(p.rt[1]);
    a = lib_alloc(p.rt[0], (size_t)1 << 20);
    b = lib_alloc(p.rt[1], (size_t)3 << 20);
    assert_int_equal(in_use(p.rt[0]) - base0, (uint64_t)1 << 20);
    assert_int_equal(in_use(p.rt[1]) - base1, (uint64_t)3 << 20);
    assert_ok(tf_runtime_new(1, &again));
    assert_int_equal(in_use(again), in_use(p.rt[1]));
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_MEM_POOLS), 2);
    assert_ok(tf_runtime_sync(p.rt[1]));
    lib_free(again, b); /* any runtime of the device frees its pool's memory */
    assert_int_equal(in_use(p.rt[1]), base1);
    assert_int_equal(in_use(p.rt[0]) - base0, (uint64_t)1 << 20);
    lib_free(p.rt[0], a);
    assert_ok(tf_runtime_release(again));
    close_pair(&p);
    if (tfd()) {
        assert_int_equal(tfd()->tfd_live(TFD_MEM_POOLS), 0);
        assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 0);
    }
}

/* A page-locked block of one device's runtime (portable) carries the other
 * device's synchronous upload and download; the other's asynchronous
 * copies refuse it, as the header says (the block's pool could not be told
 * of their use), and nothing is queued.  Both directions. */
static void host_block_of_one_device_serves_the_other(void **state) {
    struct pair p;
    const size_t n = ((size_t)1 << 20) + 7;
    unsigned char *h = NULL;
    uint64_t dev;
    int s;
    (void)state;
    REQUIRE_TWO_DEVICES();
    open_pair(&p);
    for (s = 0; s < 2; ++s) {
        tf_runtime *owner = p.rt[s], *user = p.rt[1 - s];
        assert_ok(tf_host_alloc(owner, n, (void **)&h));
        dev = lib_alloc(user, n);
        fill_pattern(h, n, 90 + (uint32_t)s);
        assert_ok(tf_upload(user, h, dev, n));
        memset(h, 0, n);
        assert_ok(tf_download(user, dev, h, n));
        assert_pattern(h, n, 90 + (uint32_t)s);
        assert_failure(tf_upload_async(user, h, dev, n), TF_ERROR_INVALID_ARGUMENT,
                       "tf_upload_async", "tf_host_alloc");
        assert_failure(tf_download_async(user, dev, h, n), TF_ERROR_INVALID_ARGUMENT,
                       "tf_download_async", "tf_host_register");
        assert_ok(tf_runtime_sync(user));
        assert_pattern(h, n, 90 + (uint32_t)s); /* the refused copies wrote nothing */
        assert_ok(tf_host_free(owner, h));
        lib_free(user, dev);
    }
    close_pair(&p);
    if (tfd()) {
        assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
        assert_int_equal(tfd()->tfd_primary_refcount(1), 0);
    }
}

/* Scalar reads on both devices from several threads at once, with idle
 * gaps so both the spinning and the waiting paths run: every read returns
 * the value its own thread wrote. */
struct scalar_worker {
    struct pair *p;
    int index;
    int failures;
    char why[160];
};

static void *read_scalars_on_both(void *arg) {
    struct scalar_worker *w = arg;
    uint64_t buf[2] = {0, 0};
    int i;
    for (i = 0; i < 2; ++i)
        if (tf_alloc(w->p->rt[i], 64, &buf[i]) != TF_OK) {
            snprintf(w->why, sizeof w->why, "tf_alloc: %s", tf_last_error_message());
            ++w->failures;
            return NULL;
        }
    for (i = 0; i < ROUNDS * 4 && !w->failures; ++i) {
        const int d = (w->index + i) & 1;
        const uint64_t value = ((uint64_t)w->index << 32) | (uint64_t)i, got = ~value;
        uint64_t out = got;
        if (tf_upload(w->p->rt[d], &value, buf[d], sizeof value) != TF_OK ||
            tf_download_scalar(w->p->rt[d], buf[d], &out, sizeof out) != TF_OK) {
            snprintf(w->why, sizeof w->why, "round %d: %s", i, tf_last_error_message());
            ++w->failures;
        } else if (out != value) {
            snprintf(w->why, sizeof w->why, "round %d on device %d: read %llx, wrote %llx", i, d,
                     (unsigned long long)out, (unsigned long long)value);
            ++w->failures;
        }
        if (i % 7 == 0) usleep(2000); /* an idle gap */
    }
    for (i = 0; i < 2; ++i)
        if (tf_free(w->p->rt[i], buf[i]) != TF_OK) ++w->failures;
    return NULL;
}

static void scalar_reads_on_both_devices_from_threads(void **state) {
    struct pair p;
    struct scalar_worker w[THREADS];
    pthread_t t[THREADS];
    int i;
    (void)state;
    REQUIRE_TWO_DEVICES();
    open_pair(&p);
    for (i = 0; i < THREADS; ++i) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].p = &p;
        w[i].index = i;
        assert_int_equal(pthread_create(&t[i], NULL, read_scalars_on_both, &w[i]), 0);
    }
    for (i = 0; i < THREADS; ++i) pthread_join(t[i], NULL);
    for (i = 0; i < THREADS; ++i) {
        if (w[i].failures) print_error("thread %d: %s\n", i, w[i].why);
        assert_int_equal(w[i].failures, 0);
    }
    close_pair(&p);
}

/* A fault on the destination's device is the destination's: a peer copy to
 * it is refused, and the healthy source runtime stays usable. */
static int32_t noop(void *user_data) {
    (void)user_data;
    return 0;
}

static void fault_of_the_destination_leaves_the_source_usable(void **state) {
    struct pair p;
    uint64_t a = 0, b = 0;
    void *stream = NULL;
    (void)state;
    REQUIRE_TWO_DEVICES();
    REQUIRE_DOUBLE();
    open_pair(&p);
    assert_ok(tf_alloc(p.rt[0], 256, &a));
    assert_ok(tf_alloc(p.rt[1], 256, &b));
    assert_ok(tf_runtime_stream(p.rt[1], &stream));
    tfd()->tfd_poison_context(p.ctx[1], CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_failure(tf_runtime_sync(p.rt[1]), TF_ERROR_DEVICE_FAULT, "tf_runtime_sync", "(700)");
    assert_failure(tf_peer_copy(p.rt[0], a, p.rt[1], b, 256), TF_ERROR_DEVICE_FAULT, "tf_peer_copy",
                   "unusable");
    assert_ok(tf_with_context(p.rt[0], noop, NULL));
    assert_ok(tf_runtime_sync(p.rt[0]));
    assert_ok(tf_free(p.rt[0], a));
    close_pair(&p);
}

/* A fault the driver reports during a peer copy belongs to the runtime
 * whose context was current: the destination's range check runs in the
 * destination's context, the rest in the source's.  That runtime alone is
 * marked (later calls refuse it without a driver call); the other stays
 * usable. */
static void check_fault_marks(struct pair *p, int faulty) {
    const int healthy = 1 - faulty;
    void *stream = NULL;
    char log[256];
    tfd()->tfd_log_clear();
    assert_failure(tf_with_context(p->rt[faulty], noop, NULL), TF_ERROR_DEVICE_FAULT,
                   "tf_with_context", "unusable after a sticky device fault");
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log, ""); /* refused from the record alone */
    assert_ok(tf_with_context(p->rt[healthy], noop, NULL));
    assert_ok(tf_runtime_stream(p->rt[healthy], &stream));
    assert_ok(tf_runtime_sync(p->rt[healthy]));
}

static void peer_copy_fault_marks_the_faulted_runtime(void **state) {
    int faulty;
    (void)state;
    REQUIRE_TWO_DEVICES();
    REQUIRE_DOUBLE();
    for (faulty = 1; faulty >= 0; --faulty) { /* the destination, then the source */
        struct pair p;
        uint64_t a = 0, b = 0;
        open_pair(&p);
        assert_ok(tf_alloc(p.rt[0], 256, &a));
        assert_ok(tf_alloc(p.rt[1], 256, &b));
        tfd()->tfd_poison_context(p.ctx[faulty], CUDA_ERROR_ILLEGAL_ADDRESS);
        assert_failure(tf_peer_copy(p.rt[0], a, p.rt[1], b, 256), TF_ERROR_DEVICE_FAULT,
                       "tf_peer_copy", "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
        check_fault_marks(&p, faulty);
        assert_ok(faulty == 1 ? tf_free(p.rt[0], a) : tf_free(p.rt[1], b));
        close_pair(&p); /* the faulted one leaks quietly */
        tfd()->tfd_poison_context(p.ctx[faulty], 0);
    }
}

static const struct child_scenario scenarios[] = {
    {"discovery", child_discovery},
    {"device1_only", child_device1_only},
    {"device1_cublas", child_device1_cublas},
    {NULL, NULL},
};

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(discovery_creates_no_context_in_a_fresh_process),
        TF_TEST(runtime_on_device_1_leaves_device_0_alone),
        TF_TEST(cublas_on_device_1_leaves_device_0_alone),
        TF_TEST(context_restored_across_devices),
        TF_TEST(failed_activation_keeps_the_other_devices_context),
        TF_TEST(availability_matches_the_driver_per_pair),
        TF_TEST(peer_copy_is_ordered_after_source_work),
        TF_TEST(peer_copy_without_direct_access_is_right),
        TF_TEST(memory_of_the_other_device_is_refused),
        TF_TEST(fault_of_the_destination_leaves_the_source_usable),
        TF_TEST(peer_copy_fault_marks_the_faulted_runtime),
        TF_TEST(peer_copy_checks_the_destination_from_its_context),
        TF_TEST(peer_copy_overlap_is_checked_within_a_device),
        TF_TEST(peer_access_is_set_up_again_for_a_new_destination_context),
        TF_TEST(threads_use_both_devices),
        TF_TEST(each_device_has_its_own_pool),
        TF_TEST(host_block_of_one_device_serves_the_other),
        TF_TEST(scalar_reads_on_both_devices_from_threads),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
