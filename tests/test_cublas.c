/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tf_cublas_enqueue, tf_cublas_symbol, tf_cublas_version: one lazily made
 * handle per slot, bound to the slot's stream once, with the runtime's
 * workspace; the pointer mode set before every enqueue under the slot lock;
 * every failure of the setup undone; GEMMs that match a CPU reference (on
 * the double and on a GPU). */
#include <cublas_api.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/raw_memory.h"
#include "support/test_support.h"

typedef __typeof__(cublasSgemm_v2) sgemm_fn;
typedef __typeof__(cublasDgemm_v2) dgemm_fn;

/* A cuBLAS function through tf_cublas_symbol (ISO C converts no data
 * pointer to a function pointer: copy the bits). */
static sgemm_fn *sgemm(void) {
    void *f = NULL;
    sgemm_fn *fn;
    assert_ok(tf_cublas_symbol("cublasSgemm_v2", &f));
    memcpy(&fn, &f, sizeof fn);
    return fn;
}

static dgemm_fn *dgemm(void) {
    void *f = NULL;
    dgemm_fn *fn;
    assert_ok(tf_cublas_symbol("cublasDgemm_v2", &f));
    memcpy(&fn, &f, sizeof fn);
    return fn;
}

/* Skips on a GPU machine where cuBLAS cannot be loaded (say so loudly). */
static void require_cublas(tf_runtime *rt) {
    int32_t yes = 0;
    assert_ok(tf_runtime_supports(rt, TF_CAP_CUBLAS, &yes));
    if (!yes) {
        print_message("    (cuBLAS cannot be loaded here: add it to LD_LIBRARY_PATH; skipped)\n");
        tf_runtime_release(rt);
        skip();
    }
}

/* ---- what a callback saw ------------------------------------------------ */

struct seen {
    void *handle, *stream, *context;
    int calls;
    int32_t ret;
};

static int32_t record(void *handle, void *stream, void *user_data) {
    struct seen *s = user_data;
    s->handle = handle;
    s->stream = stream;
    s->context = raw_current_context();
    s->calls++;
    return s->ret;
}

static void handle_is_made_once_bound_and_reused(void **state) {
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context(), *primary = NULL, *stream = NULL;
    struct seen a, b;
    (void)state;
    require_cublas(rt);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_ok(tf_runtime_primary_context(rt, &primary));
    raw_set_current_context(other);
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &a));
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_DEVICE, record, &b));
    assert_ptr_equal(raw_current_context(), other);
    assert_int_equal(a.calls, 1);
    assert_non_null(a.handle);
    assert_ptr_equal(a.handle, b.handle);
    assert_ptr_equal(a.context, primary);
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_ptr_equal(a.stream, stream);
    assert_ptr_equal(b.stream, stream);
    if (tfd()) {
        struct tfd_cublas_info info;
        assert_int_equal(tfd()->tfd_cublas_get(a.handle, &info), 0);
        assert_ptr_equal(info.context, primary);
        assert_ptr_equal(info.stream, stream);
        assert_int_equal(info.workspace_size, TF_DEFAULT_CUBLAS_WORKSPACE_BYTES);
        assert_non_null(info.workspace);
        assert_int_equal(info.pointer_mode, CUBLAS_POINTER_MODE_DEVICE);
        assert_int_equal(tfd()->tfd_calls("cublasCreate_v2"), 1);
        assert_int_equal(tfd()->tfd_calls("cublasSetStream_v2"), 1);
        assert_int_equal(tfd()->tfd_calls("cublasSetWorkspace_v2"), 1);
        assert_int_equal(tfd()->tfd_calls("cublasSetPointerMode_v2"), 2);
        assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 1);
    }
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
    if (tfd()) {
        assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 0);
        assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 0);
        assert_int_equal(tfd()->tfd_reclaimed(TFD_DEVICE_ALLOCS), 0);
    }
}

/* The enqueue path once the handle exists: with the primary context
 * current, one context check, the pointer mode, the callback and one more
 * context check (the callback may have moved the thread). */
static void warm_enqueue_makes_only_the_calls_it_needs(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *primary = NULL, *other = raw_create_context();
    struct seen s;
    char log[256];
    memset(&s, 0, sizeof s);
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s));
    assert_ok(tf_runtime_primary_context(rt, &primary));
    raw_set_current_context(primary);
    tfd()->tfd_log_clear();
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log, "cuCtxGetCurrent,cublasSetPointerMode_v2,cuCtxGetCurrent");
    raw_set_current_context(other);
    tfd()->tfd_log_clear();
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log,
                        "cuCtxGetCurrent,cuCtxSetCurrent,cublasSetPointerMode_v2,cuCtxSetCurrent");
    assert_ptr_equal(raw_current_context(), other);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
}

static void each_slot_has_its_own_handle(void **state) {
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL, *s1 = NULL;
    struct seen a, b;
    void *stream1 = NULL;
    (void)state;
    require_cublas(rt);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_bind_slot(rt, 1, &s1));
    assert_ok(tf_cublas_enqueue(s0, TF_CUBLAS_POINTER_MODE_HOST, record, &a));
    assert_ok(tf_cublas_enqueue(s1, TF_CUBLAS_POINTER_MODE_HOST, record, &b));
    assert_ptr_not_equal(a.handle, b.handle);
    assert_ptr_not_equal(a.stream, b.stream);
    assert_ok(tf_runtime_slot_stream(rt, 1, &stream1));
    assert_ptr_equal(b.stream, stream1);
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 2);
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(s1));
    assert_ok(tf_runtime_release(rt));
}

static tf_runtime *runtime_with_workspace(uint64_t bytes) {
    tf_runtime *rt = NULL;
    tf_runtime_options o;
    tf_runtime_options_init(&o, sizeof o);
    o.cublas_workspace_bytes = bytes;
    assert_ok(tf_runtime_new_with_options(0, &o, &rt));
    return rt;
}

static void workspace_size_comes_from_the_options(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *none = runtime_with_workspace(0), *small = runtime_with_workspace(1 << 20);
    struct seen a, b;
    void *ptr = NULL;
    size_t size = 1;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_ok(tf_cublas_enqueue(none, TF_CUBLAS_POINTER_MODE_HOST, record, &a));
    assert_int_equal(tfd()->tfd_calls("cuMemAlloc"), 0);
    assert_int_equal(tfd()->tfd_calls("cublasSetWorkspace_v2"), 0);
    assert_int_equal(tfd()->tfd_cublas_workspace(a.handle, &ptr, &size), 0);
    assert_null(ptr);
    assert_int_equal(size, 0);
    assert_ok(tf_cublas_enqueue(small, TF_CUBLAS_POINTER_MODE_HOST, record, &b));
    assert_int_equal(tfd()->tfd_cublas_workspace(b.handle, &ptr, &size), 0);
    assert_non_null(ptr);
    assert_int_equal(size, 1 << 20);
    assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 1);
    assert_ok(tf_runtime_release(none));
    assert_ok(tf_runtime_release(small));
    assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 0);
}

static void bad_arguments_are_refused(void **state) {
    tf_runtime *rt = new_runtime();
    struct seen s;
    void *f = NULL;
    int32_t v = 0;
    (void)state;
    memset(&s, 0, sizeof s);
    assert_failure(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, NULL, NULL),
                   TF_ERROR_INVALID_ARGUMENT, "tf_cublas_enqueue", "fn is NULL");
    assert_failure(tf_cublas_enqueue(rt, 2, record, &s), TF_ERROR_INVALID_ARGUMENT,
                   "tf_cublas_enqueue", "pointer_mode 2");
    assert_failure(tf_cublas_enqueue(NULL, 0, record, &s), TF_ERROR_INVALID_ARGUMENT,
                   "tf_cublas_enqueue", "NULL");
    assert_int_equal(s.calls, 0);
    assert_failure(tf_cublas_symbol(NULL, &f), TF_ERROR_INVALID_ARGUMENT, "tf_cublas_symbol",
                   "name is NULL");
    assert_failure(tf_cublas_symbol("cublasSgemm_v2", NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_cublas_symbol", "out_function is NULL");
    /* dlsym would find libc's malloc through cuBLAS's dependencies. */
    assert_failure(tf_cublas_symbol("malloc", &f), TF_ERROR_INVALID_ARGUMENT, "tf_cublas_symbol",
                   "'malloc' is not a cuBLAS symbol");
    assert_null(f);
    /* The whole prefix counts, its case included. */
    assert_failure(tf_cublas_symbol("cublaSgemm_v2", &f), TF_ERROR_INVALID_ARGUMENT,
                   "tf_cublas_symbol", "'cublaSgemm_v2' is not a cuBLAS symbol");
    assert_failure(tf_cublas_symbol("cubla", &f), TF_ERROR_INVALID_ARGUMENT, "tf_cublas_symbol",
                   "is not a cuBLAS symbol");
    assert_null(f);
    assert_failure(tf_cublas_version(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_cublas_version", "NULL");
    (void)v;
    assert_ok(tf_runtime_release(rt));
}

static void symbols_and_version_come_from_the_loaded_cublas(void **state) {
    tf_runtime *rt = new_runtime();
    void *f = NULL, *lib;
    int32_t version = 0, supported = 0;
    (void)state;
    require_cublas(rt);
    assert_ok(tf_runtime_supports(rt, TF_CAP_CUBLAS, &supported));
    assert_int_equal(supported, 1);
    assert_ok(tf_cublas_symbol("cublasSgemm_v2", &f));
    assert_non_null(f);
    assert_ok(tf_cublas_version(&version));
    assert_true(version >= 120000 && version < 140000);
    assert_failure(tf_cublas_symbol("cublasNoSuchFunction", &f), TF_ERROR_NOT_SUPPORTED,
                   "tf_cublas_symbol", "no symbol 'cublasNoSuchFunction'");
    if (tfd()) {
        /* The double's libcublas.so.13 is the one the library loaded. */
        lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_NOLOAD);
        assert_non_null(lib);
        assert_ok(tf_cublas_symbol("cublasSgemm_v2", &f));
        assert_ptr_equal(f, dlsym(lib, "cublasSgemm_v2"));
        assert_int_equal(version, 130100);
        dlclose(lib);
    }
    assert_ok(tf_runtime_release(rt));
}

/* ---- failures while making the handle ------------------------------------ */

/* Runs one enqueue with `entry` failing, from another context, and checks
 * the status, the message, the caller's context, that the callback never
 * ran and that nothing half-made stayed alive; then the next call works. */
static void check_setup_failure(const char *entry, int code, tf_status expected,
                                const char *fragment) {
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context();
    struct seen s;
    long allocs, handles;
    memset(&s, 0, sizeof s);
    raw_set_current_context(other);
    allocs = tfd()->tfd_live(TFD_DEVICE_ALLOCS);
    handles = tfd()->tfd_live(TFD_CUBLAS_HANDLES);
    INJECT(entry, 1, code, 1);
    assert_failure(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s), expected,
                   "tf_cublas_enqueue", fragment);
    assert_string_equal(tf_last_error_call(), entry);
    assert_int_equal(tf_last_error_code(), code);
    assert_ptr_equal(raw_current_context(), other);
    assert_int_equal(s.calls, 0);
    assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), handles);
    assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), allocs);
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s));
    assert_int_equal(s.calls, 1);
    assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), handles + 1);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), handles);
}

static void create_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_setup_failure("cublasCreate_v2", CUBLAS_STATUS_ALLOC_FAILED, TF_ERROR_PROVIDER,
                        "cuBLAS cublasCreate_v2 failed: CUBLAS_STATUS_ALLOC_FAILED (3)");
    assert_int_equal(tfd()->tfd_calls("cublasDestroy_v2"), 1); /* the second handle's */
}

/* A handle cuBLAS cannot make names the cuBLAS file the library loaded,
 * so a cuBLAS that does not belong with the driver shows. */
static void create_failure_names_the_loaded_cublas(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *create = NULL;
    Dl_info info;
    struct seen s;
    char file[PATH_MAX], want[PATH_MAX + 32];
    memset(&s, 0, sizeof s);
    assert_ok(tf_cublas_symbol("cublasCreate_v2", &create));
    assert_true(dladdr(create, &info) != 0);
    assert_non_null(realpath(info.dli_fname, file));
    snprintf(want, sizeof want, "(cuBLAS loaded from %s)", file);
    INJECT("cublasCreate_v2", 1, CUBLAS_STATUS_NOT_INITIALIZED, 1);
    assert_failure(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s),
                   TF_ERROR_PROVIDER, "tf_cublas_enqueue",
                   "cuBLAS cublasCreate_v2 failed: CUBLAS_STATUS_NOT_INITIALIZED (1)", want);
    assert_int_equal(s.calls, 0);
    assert_ok(tf_runtime_release(rt));
}

static void set_stream_failure_destroys_the_handle(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_setup_failure("cublasSetStream_v2", CUBLAS_STATUS_INTERNAL_ERROR, TF_ERROR_PROVIDER,
                        "cublasSetStream_v2 failed: CUBLAS_STATUS_INTERNAL_ERROR (14)");
    assert_int_equal(tfd()->tfd_calls("cublasDestroy_v2"), 2);
}

static void workspace_allocation_failure_destroys_the_handle(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_setup_failure("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY, TF_ERROR_OUT_OF_MEMORY,
                        "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2)");
    assert_int_equal(tfd()->tfd_calls("cublasDestroy_v2"), 2);
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_CUDA);
}

static void set_workspace_failure_frees_it_and_destroys_the_handle(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_setup_failure("cublasSetWorkspace_v2", CUBLAS_STATUS_INVALID_VALUE, TF_ERROR_PROVIDER,
                        "cublasSetWorkspace_v2 failed: CUBLAS_STATUS_INVALID_VALUE (7)");
    assert_int_equal(tfd()->tfd_calls("cublasDestroy_v2"), 2);
    assert_int_equal(tfd()->tfd_calls("cuMemFree"), 2);
}

static void pointer_mode_failure_skips_the_callback(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct seen s;
    memset(&s, 0, sizeof s);
    INJECT("cublasSetPointerMode_v2", 1, CUBLAS_STATUS_NOT_INITIALIZED, 1);
    assert_failure(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s),
                   TF_ERROR_PROVIDER, "tf_cublas_enqueue",
                   "cublasSetPointerMode_v2 failed: CUBLAS_STATUS_NOT_INITIALIZED (1)");
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_CUBLAS);
    assert_int_equal(s.calls, 0);
    assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 1); /* complete: kept */
    assert_null(raw_current_context());
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s));
    assert_int_equal(tfd()->tfd_calls("cublasCreate_v2"), 1);
    assert_ok(tf_runtime_release(rt));
}

static void callback_status_is_a_provider_error(void **state) {
    tf_runtime *rt = new_runtime();
    struct seen s;
    (void)state;
    require_cublas(rt);
    memset(&s, 0, sizeof s);
    s.ret = CUBLAS_STATUS_EXECUTION_FAILED;
    assert_failure(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s),
                   TF_ERROR_PROVIDER, "tf_cublas_enqueue", "cuBLAS",
                   "CUBLAS_STATUS_EXECUTION_FAILED (13)");
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_CUBLAS);
    assert_int_equal(tf_last_error_code(), CUBLAS_STATUS_EXECUTION_FAILED);
    assert_string_equal(tf_last_error_call(), "callback");
    s.ret = 0;
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s));
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

/* ---- re-entry -------------------------------------------------------------- */

struct reentry {
    tf_runtime *rt;
    tf_status cublas, stream, wait;
};

static int32_t no_cublas(void *h, void *s, void *u) {
    (void)h, (void)s, (void)u;
    return 0;
}

static int32_t no_stream(void *s, void *u) {
    (void)s, (void)u;
    return 0;
}

static int32_t reenter(void *handle, void *stream, void *user_data) {
    struct reentry *r = user_data;
    (void)handle, (void)stream;
    r->cublas = tf_cublas_enqueue(r->rt, TF_CUBLAS_POINTER_MODE_HOST, no_cublas, NULL);
    r->stream = tf_stream_enqueue(r->rt, no_stream, NULL);
    r->wait = tf_slot_wait(r->rt, 1); /* takes no slot lock */
    return 0;
}

static void reentry_is_refused_not_deadlocked(void **state) {
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL;
    struct reentry r;
    (void)state;
    require_cublas(rt);
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    r.rt = s0;
    assert_ok(tf_cublas_enqueue(s0, TF_CUBLAS_POINTER_MODE_HOST, reenter, &r));
    assert_int_equal(r.cublas, TF_ERROR_RUNTIME_STATE);
    assert_int_equal(r.stream, TF_ERROR_RUNTIME_STATE);
    assert_int_equal(r.wait, TF_OK);
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(rt));
}

/* ---- teardown ------------------------------------------------------------- */

/* A runtime whose calling thread's slot has its cuBLAS handle. */
static tf_runtime *runtime_with_handle(void) {
    tf_runtime *rt = new_runtime();
    struct seen s;
    memset(&s, 0, sizeof s);
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, record, &s));
    return rt;
}

static void teardown_failure_leaks_the_handle(void **state) {
    tf_runtime *rt;
    const char *warnings;
    (void)state;
    REQUIRE_DOUBLE();
    rt = runtime_with_handle();
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "cuBLAS handles"));
    assert_int_equal(tfd()->tfd_calls("cublasDestroy_v2"), 0);
    assert_int_equal(tfd()->tfd_calls("cuMemFree"), 0);
    test_leaves_live(TFD_CUBLAS_HANDLES, 1); /* the leak */
}

static void teardown_destroy_failures_are_logged(void **state) {
    tf_runtime *rt;
    const char *warnings;
    (void)state;
    REQUIRE_DOUBLE();
    rt = runtime_with_handle();
    INJECT("cublasDestroy_v2", 1, CUBLAS_STATUS_INTERNAL_ERROR, 1);
    INJECT("cuMemFree", 1, CUDA_ERROR_INVALID_VALUE, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "cublasDestroy_v2 failed: CUBLAS_STATUS_INTERNAL_ERROR (14)"));
    assert_non_null(strstr(warnings, "cuMemFree of a cuBLAS workspace failed"));
    assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
    assert_null(raw_current_context());
    test_leaves_live(TFD_CUBLAS_HANDLES, 1); /* the handle cuBLAS refused to destroy */
}

/* ---- GEMMs against a CPU reference ----------------------------------------- */

struct gemm {
    int ta, tb, m, n, k;
    uint64_t a, b, c, scalars; /* device addresses */
    double alpha, beta;
    int device_scalars;
    int is_double;
};

static int32_t run_gemm(void *handle, void *stream, void *user_data) {
    const struct gemm *g = user_data;
    cublasOperation_t ta = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = g->ta ? g->k : g->m, ldb = g->tb ? g->n : g->k;
    (void)stream;
    if (g->is_double) {
        const double *alpha = &g->alpha, *beta = &g->beta;
        if (g->device_scalars) {
            alpha = (const double *)(uintptr_t)g->scalars;
            beta = alpha + 1;
        }
        return dgemm()(handle, ta, tb, g->m, g->n, g->k, alpha, (const double *)(uintptr_t)g->a,
                       lda, (const double *)(uintptr_t)g->b, ldb, beta, (double *)(uintptr_t)g->c,
                       g->m);
    } else {
        float alpha = (float)g->alpha, beta = (float)g->beta;
        return sgemm()(handle, ta, tb, g->m, g->n, g->k, &alpha, (const float *)(uintptr_t)g->a,
                       lda, (const float *)(uintptr_t)g->b, ldb, &beta, (float *)(uintptr_t)g->c,
                       g->m);
    }
}

static double fill(uint32_t *seed) {
    *seed = *seed * 1664525u + 1013904223u;
    return ((double)(*seed >> 8) / (double)(1u << 24)) * 2.0 - 1.0;
}

/* C (m x n) = alpha op(A) op(B) + beta C, column-major, computed in double. */
static void reference(const struct gemm *g, const double *a, const double *b, double *c) {
    int i, j, p;
    int lda = g->ta ? g->k : g->m, ldb = g->tb ? g->n : g->k;
    for (j = 0; j < g->n; ++j)
        for (i = 0; i < g->m; ++i) {
            double sum = 0;
            for (p = 0; p < g->k; ++p)
                sum += (g->ta ? a[p + (size_t)i * lda] : a[i + (size_t)p * lda]) *
                       (g->tb ? b[j + (size_t)p * ldb] : b[p + (size_t)j * ldb]);
            c[i + (size_t)j * g->m] = g->alpha * sum + g->beta * c[i + (size_t)j * g->m];
        }
}

static void check_gemm(tf_runtime *rt, struct gemm *g, uint32_t seed) {
    size_t na = (size_t)g->m * g->k, nb = (size_t)g->k * g->n, nc = (size_t)g->m * g->n, i;
    size_t es = g->is_double ? 8 : 4;
    double *a = malloc(na * 8), *b = malloc(nb * 8), *c = malloc(nc * 8);
    void *ha = malloc(na * es), *hb = malloc(nb * es), *hc = malloc(nc * es);
    double tol = g->is_double ? 1e-12 : 1e-5 * (g->k + 1);
    for (i = 0; i < na; ++i) a[i] = fill(&seed);
    for (i = 0; i < nb; ++i) b[i] = fill(&seed);
    for (i = 0; i < nc; ++i) c[i] = fill(&seed);
#define TO_DEVICE_TYPE(dst, src, n)                                                \
    for (i = 0; i < (n); ++i) {                                                    \
        if (g->is_double)                                                          \
            ((double *)(dst))[i] = (src)[i];                                       \
        else                                                                       \
            ((float *)(dst))[i] = (float)(src)[i], (src)[i] = ((float *)(dst))[i]; \
    }
    TO_DEVICE_TYPE(ha, a, na);
    TO_DEVICE_TYPE(hb, b, nb);
    TO_DEVICE_TYPE(hc, c, nc);
#undef TO_DEVICE_TYPE
    g->a = dev_alloc(rt, na * es);
    g->b = dev_alloc(rt, nb * es);
    g->c = dev_alloc(rt, nc * es);
    dev_upload(rt, g->a, ha, na * es);
    dev_upload(rt, g->b, hb, nb * es);
    dev_upload(rt, g->c, hc, nc * es);
    if (g->device_scalars) {
        double ab[2];
        ab[0] = g->alpha, ab[1] = g->beta;
        g->scalars = dev_alloc(rt, sizeof ab);
        dev_upload(rt, g->scalars, ab, sizeof ab);
    }
    assert_ok(tf_cublas_enqueue(
        rt, g->device_scalars ? TF_CUBLAS_POINTER_MODE_DEVICE : TF_CUBLAS_POINTER_MODE_HOST,
        run_gemm, g));
    dev_download(rt, hc, g->c, nc * es);
    reference(g, a, b, c);
    for (i = 0; i < nc; ++i) {
        double got = g->is_double ? ((double *)hc)[i] : ((float *)hc)[i];
        if (fabs(got - c[i]) > tol * (1 + fabs(c[i])))
            fail_msg("%s %dx%dx%d ta=%d tb=%d: C[%zu] = %.9g, expected %.9g",
                     g->is_double ? "DGEMM" : "SGEMM", g->m, g->n, g->k, g->ta, g->tb, i, got,
                     c[i]);
    }
    dev_free(rt, g->a);
    dev_free(rt, g->b);
    dev_free(rt, g->c);
    if (g->device_scalars) dev_free(rt, g->scalars);
    free(a), free(b), free(c), free(ha), free(hb), free(hc);
}

static void gemms_match_a_cpu_reference(void **state) {
    static const int shapes[][5] = {
        /* m, n, k, ta, tb */
        {1, 1, 1, 0, 0},     {64, 64, 64, 0, 0},  {33, 17, 65, 1, 0},
        {128, 96, 40, 0, 1}, {7, 300, 129, 1, 1}, {256, 256, 256, 0, 0},
    };
    tf_runtime *rt = new_runtime();
    size_t i;
    int dbl;
    (void)state;
    require_cublas(rt);
    for (dbl = 0; dbl < 2; ++dbl)
        for (i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
            struct gemm g;
            memset(&g, 0, sizeof g);
            g.m = shapes[i][0], g.n = shapes[i][1], g.k = shapes[i][2];
            g.ta = shapes[i][3], g.tb = shapes[i][4];
            g.alpha = 0.75, g.beta = i % 2 ? -0.5 : 0.0;
            g.is_double = dbl;
            g.device_scalars = dbl && i % 2; /* DGEMM also with alpha/beta on the device */
            check_gemm(rt, &g, (uint32_t)(11 + i + 100 * dbl));
        }
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

/* Threads on their own slots enqueue at once; each sees its own results. */
struct gemm_thread {
    tf_runtime *rt;
    int index;
};

static void *gemm_worker(void *arg) {
    struct gemm_thread *t = arg;
    int round;
    for (round = 0; round < 3; ++round) {
        struct gemm g;
        memset(&g, 0, sizeof g);
        g.m = 24 + t->index, g.n = 16, g.k = 8 + round;
        g.alpha = 1.0, g.beta = 0.0;
        check_gemm(t->rt, &g, (uint32_t)(t->index * 7 + round));
    }
    return NULL;
}

static void threads_enqueue_on_their_slots(void **state) {
    enum { N = 4 };
    tf_runtime *rt = new_runtime_with_slots(N);
    pthread_t th[N];
    struct gemm_thread t[N];
    int i;
    long before = tfd() ? tfd()->tfd_live(TFD_CUBLAS_HANDLES) : 0;
    (void)state;
    require_cublas(rt);
    for (i = 0; i < N; ++i) {
        t[i].index = i;
        assert_ok(tf_runtime_bind_slot(rt, i, &t[i].rt));
        pthread_create(&th[i], NULL, gemm_worker, &t[i]);
    }
    for (i = 0; i < N; ++i) {
        pthread_join(th[i], NULL);
        assert_ok(tf_runtime_release(t[i].rt));
    }
    /* (earlier tests leaked handles on purpose) */
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), before + N);
    assert_ok(tf_runtime_release(rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(handle_is_made_once_bound_and_reused),
        TF_TEST(warm_enqueue_makes_only_the_calls_it_needs),
        TF_TEST(each_slot_has_its_own_handle),
        TF_TEST(workspace_size_comes_from_the_options),
        TF_TEST(bad_arguments_are_refused),
        TF_TEST(symbols_and_version_come_from_the_loaded_cublas),
        TF_TEST(create_failure),
        TF_TEST(create_failure_names_the_loaded_cublas),
        TF_TEST(set_stream_failure_destroys_the_handle),
        TF_TEST(workspace_allocation_failure_destroys_the_handle),
        TF_TEST(set_workspace_failure_frees_it_and_destroys_the_handle),
        TF_TEST(pointer_mode_failure_skips_the_callback),
        TF_TEST(callback_status_is_a_provider_error),
        TF_TEST(reentry_is_refused_not_deadlocked),
        TF_TEST(teardown_failure_leaks_the_handle),
        TF_TEST(teardown_destroy_failures_are_logged),
        TF_TEST(gemms_match_a_cpu_reference),
        TF_TEST(threads_enqueue_on_their_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
