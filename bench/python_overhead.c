/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The C side of bench/python_overhead.py (make bench-python): each
 * function times `iters` calls of one library function from C and returns
 * the mean nanoseconds per call, so the Python binding's cost can be told
 * apart from the library's in the same process, on the same runtime. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c99 */
#include <stdint.h>
#include <time.h>

#include "tenferro_gpu.h"

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Every loop stops at the first failure and returns -1: a benchmark of a
 * failing call measures nothing. */
double tfpb_download_scalar(tf_runtime *rt, uint64_t src, uint32_t len, int32_t iters) {
    unsigned char out[TF_SCALAR_DOWNLOAD_MAX_BYTES];
    double t0 = now_ns();
    for (int32_t i = 0; i < iters; ++i)
        if (tf_download_scalar(rt, src, out, len) != TF_OK) return -1.0;
    return (now_ns() - t0) / iters;
}

double tfpb_stream(tf_runtime *rt, int32_t iters) {
    void *stream = 0;
    double t0 = now_ns();
    for (int32_t i = 0; i < iters; ++i)
        if (tf_runtime_stream(rt, &stream) != TF_OK) return -1.0;
    return (now_ns() - t0) / iters;
}

double tfpb_sync(tf_runtime *rt, int32_t iters) {
    double t0 = now_ns();
    for (int32_t i = 0; i < iters; ++i)
        if (tf_runtime_sync(rt) != TF_OK) return -1.0;
    return (now_ns() - t0) / iters;
}

static int32_t nothing(void *user_data) {
    (void)user_data;
    return 0;
}

double tfpb_with_context(tf_runtime *rt, int32_t iters) {
    double t0 = now_ns();
    for (int32_t i = 0; i < iters; ++i)
        if (tf_with_context(rt, nothing, 0) != TF_OK) return -1.0;
    return (now_ns() - t0) / iters;
}
