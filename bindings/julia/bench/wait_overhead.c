/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* What the Julia binding's choices cost at the C level, measured against
 * whatever libcuda.so.1 the library loads (a GPU's driver, or the double):
 *
 *   - its calls go through bound handles (a Stream per task), not the
 *     thread's slot: a bound call against an unbound one;
 *   - each task's stream is made once (tf_runtime_bind_slot + release);
 *   - before Julia 1.12 a blocking call waits by polling an event first:
 *     record + query + the call, against the call alone, on an idle stream
 *     (the least it adds; a busy stream adds the queries while it drains).
 *
 * The Julia-side costs (task-local storage lookup, the handles' atomic
 * counts) need Julia to measure.  Build and run from the repository root:
 *
 *   make lib
 *   cc -O2 -Iinclude bindings/julia/bench/wait_overhead.c -Lbuild/lib -ltenferro_gpu -ldl \
 *     -o build/wait_overhead
 *   LD_LIBRARY_PATH=build/lib build/wait_overhead
 *
 * Against the driver double (LD_LIBRARY_PATH=build/double:build/lib) it
 * lets event queries make progress, which the double's default mode does
 * not, and its numbers say nothing about a GPU.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tenferro_gpu.h"

#define REPS 31

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "wait_overhead: %s: %s\n", what, tf_last_error_message());
    exit(1);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*step_fn)(void *ctx);

/* Median over REPS samples of the mean ns per call of `iters` calls of
 * `a` and of `b`, sampled alternately. */
static void paired(int iters, step_fn a, step_fn b, void *ctx, double *ma, double *mb) {
    double va[REPS], vb[REPS];
    for (int r = 0; r < REPS; ++r) {
        double t0 = now_ns();
        for (int i = 0; i < iters; ++i) a(ctx);
        va[r] = (now_ns() - t0) / iters;
        t0 = now_ns();
        for (int i = 0; i < iters; ++i) b(ctx);
        vb[r] = (now_ns() - t0) / iters;
    }
    qsort(va, REPS, sizeof va[0], cmp_double);
    qsort(vb, REPS, sizeof vb[0], cmp_double);
    *ma = va[REPS / 2];
    *mb = vb[REPS / 2];
}

struct ctx {
    tf_runtime *rt, *bound;
    tf_event *event;
    uint64_t dptr;
    float host[1];
};

static void poll_event(struct ctx *c, tf_runtime *on) {
    int32_t done = 0;
    if (tf_event_record(on, c->event) != TF_OK) die("tf_event_record");
    while (!done)
        if (tf_event_query(c->event, &done) != TF_OK) die("tf_event_query");
}

static void sync_plain(void *p) {
    struct ctx *c = p;
    if (tf_runtime_sync(c->bound) != TF_OK) die("tf_runtime_sync");
}

static void sync_polled(void *p) {
    struct ctx *c = p;
    poll_event(c, c->bound);
    sync_plain(p);
}

static void scalar_plain(void *p) {
    struct ctx *c = p;
    if (tf_download_scalar(c->bound, c->dptr, c->host, sizeof c->host) != TF_OK) die("tf_download_scalar");
}

static void scalar_polled(void *p) {
    struct ctx *c = p;
    poll_event(c, c->bound);
    scalar_plain(p);
}

static void slot_bound(void *p) {
    struct ctx *c = p;
    int32_t slot;
    if (tf_runtime_current_slot(c->bound, &slot) != TF_OK) die("tf_runtime_current_slot");
}

static void slot_unbound(void *p) {
    struct ctx *c = p;
    int32_t slot;
    if (tf_runtime_current_slot(c->rt, &slot) != TF_OK) die("tf_runtime_current_slot");
}

static void upload_bound(void *p) {
    struct ctx *c = p;
    if (tf_upload(c->bound, c->host, c->dptr, sizeof c->host) != TF_OK) die("tf_upload");
}

static void upload_unbound(void *p) {
    struct ctx *c = p;
    if (tf_upload(c->rt, c->host, c->dptr, sizeof c->host) != TF_OK) die("tf_upload");
}

static void bind_release(void *p) {
    struct ctx *c = p;
    tf_runtime *b;
    if (tf_runtime_bind_slot(c->rt, 1, &b) != TF_OK) die("tf_runtime_bind_slot");
    if (tf_runtime_release(b) != TF_OK) die("tf_runtime_release");
}

static void nothing(void *p) { (void)p; }

static void row(const char *id, const char *what, double a, const char *base, double b) {
    printf("%-13s %-58s %10.1f ns   %-40s %10.1f ns   +%.1f ns\n", id, what, a, base, b, a - b);
}

/* On the double, queries must make progress or polling never ends. */
static void double_query_progress(void) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void (*progress)(unsigned long) = driver ? (void (*)(unsigned long))dlsym(driver, "tfd_set_query_progress") : NULL;
    if (progress) {
        progress(1ul << 20);
        printf("against the CUDA driver double: not a GPU's numbers\n");
    }
}

int main(void) {
    struct ctx c;
    memset(&c, 0, sizeof c);
    if (tf_runtime_new(0, &c.rt) != TF_OK) die("tf_runtime_new");
    double_query_progress();
    int32_t here;
    if (tf_runtime_current_slot(c.rt, &here) != TF_OK) die("tf_runtime_current_slot");
    /* The bound handle on this thread's own slot: the same stream both ways. */
    if (tf_runtime_bind_slot(c.rt, here, &c.bound) != TF_OK) die("tf_runtime_bind_slot");
    if (tf_event_new(c.rt, &c.event) != TF_OK) die("tf_event_new");
    if (tf_alloc(c.bound, sizeof c.host, &c.dptr) != TF_OK) die("tf_alloc");
    if (tf_upload(c.bound, c.host, c.dptr, sizeof c.host) != TF_OK) die("tf_upload");
    sync_plain(&c);

    double a, b;
    paired(2000, sync_polled, sync_plain, &c, &a, &b);
    row("sync_idle", "event record + query, then tf_runtime_sync (idle stream)", a, "tf_runtime_sync", b);
    paired(2000, scalar_polled, scalar_plain, &c, &a, &b);
    row("scalar_4B", "event record + query, then tf_download_scalar 4 B", a, "tf_download_scalar 4 B", b);
    paired(20000, slot_bound, slot_unbound, &c, &a, &b);
    row("bound_query", "tf_runtime_current_slot, bound handle", a, "the same, unbound handle", b);
    paired(20000, upload_bound, upload_unbound, &c, &a, &b);
    sync_plain(&c);
    row("bound_upload", "tf_upload 4 B, bound handle", a, "the same, unbound handle", b);
    paired(20000, bind_release, nothing, &c, &a, &b);
    row("task_stream", "tf_runtime_bind_slot + tf_runtime_release", a, "nothing", b);

    if (tf_free(c.bound, c.dptr) != TF_OK) die("tf_free");
    sync_plain(&c);
    tf_event_release(c.event);
    tf_runtime_release(c.bound);
    tf_runtime_release(c.rt);
    return 0;
}
