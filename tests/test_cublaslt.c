/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tf_cublaslt_enqueue, tf_cublaslt_symbol: one lazily made cuBLASLt handle
 * per slot, the slot's stream, and the workspace the slot's cuBLAS handle
 * uses; every failure of the setup undone; the callback's statuses;
 * re-entry, capture, teardown and a forked child; a matmul with a cached
 * plan that matches the host's product, run and captured. */
#include <cublasLt.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/raw_memory.h"
#include "support/test_support.h"

/* Skips on a GPU machine where cuBLASLt cannot be loaded (say so loudly). */
static void require_cublaslt(tf_runtime *rt) {
    void *f = NULL;
    if (tf_cublaslt_symbol("cublasLtCreate", &f) == TF_OK) return;
    print_message("    (cuBLASLt cannot be loaded here: add it to LD_LIBRARY_PATH; skipped)\n");
    tf_runtime_release(rt);
    skip();
}

/* ---- what a callback saw ------------------------------------------------ */

struct seen {
    void *handle, *stream, *context;
    uint64_t workspace, workspace_bytes;
    int calls;
    int32_t ret;
};

static int32_t record(void *handle, void *stream, uint64_t workspace, uint64_t workspace_bytes,
                      void *user_data) {
    struct seen *s = user_data;
    s->handle = handle;
    s->stream = stream;
    s->workspace = workspace;
    s->workspace_bytes = workspace_bytes;
    s->context = raw_current_context();
    s->calls++;
    return s->ret;
}

static int32_t cublas_record(void *handle, void *stream, void *user_data) {
    struct seen *s = user_data;
    s->handle = handle;
    s->stream = stream;
    s->calls++;
    return 0;
}

static void handle_is_made_once_and_reused(void **state) {
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context(), *primary = NULL, *stream = NULL;
    struct seen a, b;
    (void)state;
    require_cublaslt(rt);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_ok(tf_runtime_primary_context(rt, &primary));
    raw_set_current_context(other);
    assert_ok(tf_cublaslt_enqueue(rt, record, &a));
    assert_ok(tf_cublaslt_enqueue(rt, record, &b));
    assert_ptr_equal(raw_current_context(), other);
    assert_int_equal(a.calls, 1);
    assert_non_null(a.handle);
    assert_ptr_equal(a.handle, b.handle);
    assert_ptr_equal(a.context, primary);
    assert_ok(tf_runtime_stream(rt, &stream));
    assert_ptr_equal(a.stream, stream);
    assert_ptr_equal(b.stream, stream);
    assert_true(a.workspace != 0);
    assert_int_equal(a.workspace, b.workspace);
    assert_int_equal(a.workspace_bytes, TF_DEFAULT_CUBLAS_WORKSPACE_BYTES);
    if (tfd()) {
        struct tfd_cublas_info info; /* a cuBLASLt handle is a cuBLAS handle record there */
        assert_int_equal(tfd()->tfd_cublas_get(a.handle, &info), 0);
        assert_ptr_equal(info.context, primary);
        assert_int_equal(tfd()->tfd_calls("cublasLtCreate"), 1);
        assert_int_equal(tfd()->tfd_calls("cuMemAlloc"), 1);
        assert_int_equal(tfd()->tfd_calls("cublasCreate_v2"), 0);
        assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 1);
    }
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
    if (tfd()) {
        assert_int_equal(tfd()->tfd_calls("cublasLtDestroy"), 1);
        assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 0);
        assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 0);
        assert_int_equal(tfd()->tfd_reclaimed(TFD_DEVICE_ALLOCS), 0);
    }
}

/* Once the handle exists, a call adds no driver or cuBLASLt call of its own
 * beyond the context checks. */
static void warm_enqueue_makes_only_the_calls_it_needs(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    void *primary = NULL;
    struct seen s;
    char log[256];
    memset(&s, 0, sizeof s);
    assert_ok(tf_cublaslt_enqueue(rt, record, &s));
    assert_ok(tf_runtime_primary_context(rt, &primary));
    raw_set_current_context(primary);
    tfd()->tfd_log_clear();
    assert_ok(tf_cublaslt_enqueue(rt, record, &s));
    tfd()->tfd_log_format(log, sizeof log, 0);
    assert_string_equal(log, "cuCtxGetCurrent,cuCtxGetCurrent");
    raw_set_current_context(NULL);
    assert_ok(tf_runtime_release(rt));
}

static void each_slot_has_its_own_handle_and_workspace(void **state) {
    tf_runtime *rt = new_runtime_with_slots(2), *s0 = NULL, *s1 = NULL;
    struct seen a, b;
    void *stream1 = NULL;
    (void)state;
    require_cublaslt(rt);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_ok(tf_runtime_bind_slot(rt, 0, &s0));
    assert_ok(tf_runtime_bind_slot(rt, 1, &s1));
    assert_ok(tf_cublaslt_enqueue(s0, record, &a));
    assert_ok(tf_cublaslt_enqueue(s1, record, &b));
    /* Each slot makes its own handle (the double's are distinct objects);
     * the H200's cuBLASLt 13.1 answers every cublasLtCreate of a context
     * with the same pointer, so only the double can tell them apart. */
    if (tfd()) assert_ptr_not_equal(a.handle, b.handle);
    assert_non_null(a.handle);
    assert_non_null(b.handle);
    assert_ptr_not_equal(a.stream, b.stream);
    assert_true(a.workspace != b.workspace);
    assert_ok(tf_runtime_slot_stream(rt, 1, &stream1));
    assert_ptr_equal(b.stream, stream1);
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 2);
    assert_ok(tf_runtime_release(s0));
    assert_ok(tf_runtime_release(s1));
    assert_ok(tf_runtime_release(rt));
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 0);
}

/* The slot's one workspace serves both handles, whichever is made first. */
static void check_shared_workspace(int lt_first) {
    tf_runtime *rt = new_runtime();
    struct seen lt, cb;
    void *ptr = NULL;
    size_t size = 0;
    memset(&lt, 0, sizeof lt);
    memset(&cb, 0, sizeof cb);
    if (lt_first) assert_ok(tf_cublaslt_enqueue(rt, record, &lt));
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, cublas_record, &cb));
    if (!lt_first) assert_ok(tf_cublaslt_enqueue(rt, record, &lt));
    assert_ptr_not_equal(lt.handle, cb.handle);
    assert_ptr_equal(lt.stream, cb.stream);
    assert_int_equal(tfd()->tfd_cublas_workspace(cb.handle, &ptr, &size), 0);
    assert_int_equal((uint64_t)(uintptr_t)ptr, lt.workspace);
    assert_int_equal(size, lt.workspace_bytes);
    assert_int_equal(tfd()->tfd_calls("cuMemAlloc"), 1);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(tfd()->tfd_calls("cuMemFree"), 1);
    assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 0);
    assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 0);
}

static void workspace_is_shared_with_cublas(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_shared_workspace(1);
    test_reset(state);
    check_shared_workspace(0);
}

static void no_workspace_when_the_options_say_0(void **state) {
    tf_runtime *rt = NULL;
    tf_runtime_options o;
    struct seen s;
    (void)state;
    REQUIRE_DOUBLE();
    memset(&s, 0, sizeof s);
    tf_runtime_options_init(&o, sizeof o);
    o.cublas_workspace_bytes = 0;
    assert_ok(tf_runtime_new_with_options(0, &o, &rt));
    assert_ok(tf_cublaslt_enqueue(rt, record, &s));
    assert_int_equal(s.workspace, 0);
    assert_int_equal(s.workspace_bytes, 0);
    assert_int_equal(tfd()->tfd_calls("cuMemAlloc"), 0);
    assert_ok(tf_runtime_release(rt));
}

static void bad_arguments_are_refused(void **state) {
    tf_runtime *rt = new_runtime();
    struct seen s;
    void *f = NULL;
    (void)state;
    memset(&s, 0, sizeof s);
    assert_failure(tf_cublaslt_enqueue(rt, NULL, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_cublaslt_enqueue", "fn is NULL");
    assert_failure(tf_cublaslt_enqueue(NULL, record, &s), TF_ERROR_INVALID_ARGUMENT,
                   "tf_cublaslt_enqueue", "runtime handle is NULL");
    assert_int_equal(s.calls, 0);
    assert_failure(tf_cublaslt_symbol(NULL, &f), TF_ERROR_INVALID_ARGUMENT, "tf_cublaslt_symbol",
                   "name is NULL");
    assert_failure(tf_cublaslt_symbol("cublasLtMatmul", NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_cublaslt_symbol", "out_function is NULL");
    /* cuBLAS's names and libc's are not cuBLASLt's. */
    assert_failure(tf_cublaslt_symbol("cublasSgemm_v2", &f), TF_ERROR_INVALID_ARGUMENT,
                   "tf_cublaslt_symbol", "'cublasSgemm_v2' is not a cuBLASLt symbol",
                   "\"cublasLt\"");
    assert_failure(tf_cublaslt_symbol("malloc", &f), TF_ERROR_INVALID_ARGUMENT,
                   "tf_cublaslt_symbol", "'malloc' is not a cuBLASLt symbol");
    assert_null(f);
    assert_ok(tf_runtime_release(rt));
}

static void symbols_come_from_the_loaded_cublaslt(void **state) {
    tf_runtime *rt = new_runtime();
    void *f = NULL, *lib;
    (void)state;
    require_cublaslt(rt);
    assert_ok(tf_cublaslt_symbol("cublasLtMatmul", &f));
    assert_non_null(f);
    assert_failure(tf_cublaslt_symbol("cublasLtNoSuchFunction", &f), TF_ERROR_NOT_SUPPORTED,
                   "tf_cublaslt_symbol",
                   "the loaded cuBLASLt has no symbol 'cublasLtNoSuchFunction'");
    if (tfd()) {
        lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_NOLOAD);
        assert_non_null(lib);
        assert_ok(tf_cublaslt_symbol("cublasLtMatmul", &f));
        assert_ptr_equal(f, dlsym(lib, "cublasLtMatmul"));
        dlclose(lib);
    }
    assert_ok(tf_runtime_release(rt));
}

/* ---- failures while making the handle ------------------------------------ */

/* One enqueue with `entry` failing, from another context: the status, the
 * message, the caller's context, the callback never ran and nothing
 * half-made stayed alive; then the next call works. */
static void check_setup_failure(const char *entry, int code, tf_status expected,
                                const char *fragment) {
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context();
    struct seen s;
    memset(&s, 0, sizeof s);
    raw_set_current_context(other);
    INJECT(entry, 1, code, 1);
    assert_failure(tf_cublaslt_enqueue(rt, record, &s), expected, "tf_cublaslt_enqueue", fragment);
    assert_string_equal(tf_last_error_call(), entry);
    assert_int_equal(tf_last_error_code(), code);
    assert_ptr_equal(raw_current_context(), other);
    assert_int_equal(s.calls, 0);
    assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 0);
    assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 0);
    assert_ok(tf_cublaslt_enqueue(rt, record, &s));
    assert_int_equal(s.calls, 1);
    assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 1);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(tfd()->tfd_live(TFD_CUBLAS_HANDLES), 0);
    assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 0);
}

static void create_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_setup_failure("cublasLtCreate", CUBLAS_STATUS_ALLOC_FAILED, TF_ERROR_PROVIDER,
                        "cuBLAS cublasLtCreate failed: CUBLAS_STATUS_ALLOC_FAILED (3)");
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_CUBLAS);
    assert_int_equal(tfd()->tfd_calls("cublasLtDestroy"), 1); /* the second handle's */
}

static void workspace_allocation_failure_destroys_the_handle(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    check_setup_failure("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY, TF_ERROR_OUT_OF_MEMORY,
                        "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2)");
    assert_int_equal(tfd()->tfd_calls("cublasLtDestroy"), 2);
}

/* A half-made handle cuBLASLt refuses to destroy is logged; the failure
 * reported is the one that led there. */
static void half_made_handle_destroy_failure_is_logged(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct seen s;
    const char *warnings;
    memset(&s, 0, sizeof s);
    INJECT("cuMemAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    INJECT("cublasLtDestroy", 1, CUBLAS_STATUS_INTERNAL_ERROR, 1);
    log_capture_start();
    assert_failure(tf_cublaslt_enqueue(rt, record, &s), TF_ERROR_OUT_OF_MEMORY,
                   "tf_cublaslt_enqueue", "cuMemAlloc failed");
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings,
                           "cublasLtDestroy of a half-made handle failed: "
                           "CUBLAS_STATUS_INTERNAL_ERROR (14)"));
    assert_ok(tf_runtime_release(rt));
    test_leaves_live(TFD_CUBLAS_HANDLES, 1); /* the handle cuBLASLt refused to destroy */
}

static void callback_status_is_a_provider_error(void **state) {
    tf_runtime *rt = new_runtime();
    struct seen s;
    (void)state;
    require_cublaslt(rt);
    memset(&s, 0, sizeof s);
    s.ret = CUBLAS_STATUS_NOT_SUPPORTED;
    assert_failure(tf_cublaslt_enqueue(rt, record, &s), TF_ERROR_PROVIDER, "tf_cublaslt_enqueue",
                   "cuBLAS callback failed", "CUBLAS_STATUS_NOT_SUPPORTED (15)");
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_CUBLAS);
    assert_int_equal(tf_last_error_code(), CUBLAS_STATUS_NOT_SUPPORTED);
    assert_string_equal(tf_last_error_call(), "callback");
    assert_int_equal(s.calls, 1);
    s.ret = 0;
    assert_ok(tf_cublaslt_enqueue(rt, record, &s));
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

/* ---- re-entry -------------------------------------------------------------- */

struct reentry {
    tf_runtime *rt;
    tf_status lt, cublas;
    int lt_said_held; /* the refusal's message names the held slot lock */
};

static int32_t no_lt(void *h, void *s, uint64_t w, uint64_t b, void *u) {
    (void)h, (void)s, (void)w, (void)b, (void)u;
    return 0;
}

static int32_t no_cublas(void *h, void *s, void *u) {
    (void)h, (void)s, (void)u;
    return 0;
}

static int32_t reenter_from_lt(void *h, void *s, uint64_t w, uint64_t b, void *user_data) {
    struct reentry *r = user_data;
    (void)h, (void)s, (void)w, (void)b;
    r->lt = tf_cublaslt_enqueue(r->rt, no_lt, NULL);
    r->lt_said_held = strstr(tf_last_error_message(), "is already held by this thread") != NULL;
    r->cublas = tf_cublas_enqueue(r->rt, TF_CUBLAS_POINTER_MODE_HOST, no_cublas, NULL);
    return 0;
}

static int32_t reenter_from_cublas(void *h, void *s, void *user_data) {
    struct reentry *r = user_data;
    (void)h, (void)s;
    r->lt = tf_cublaslt_enqueue(r->rt, no_lt, NULL);
    return 0;
}

static void reentry_is_refused_not_deadlocked(void **state) {
    tf_runtime *rt = new_runtime();
    struct reentry r;
    (void)state;
    require_cublaslt(rt);
    r.rt = rt;
    assert_ok(tf_cublaslt_enqueue(rt, reenter_from_lt, &r));
    assert_int_equal(r.lt, TF_ERROR_RUNTIME_STATE);
    assert_true(r.lt_said_held);
    assert_int_equal(r.cublas, TF_ERROR_RUNTIME_STATE);
    r.lt = TF_OK;
    assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, reenter_from_cublas, &r));
    assert_int_equal(r.lt, TF_ERROR_RUNTIME_STATE);
    assert_ok(tf_runtime_release(rt));
}

/* ---- teardown ------------------------------------------------------------- */

static void teardown_destroy_failure_is_logged(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct seen s;
    const char *warnings;
    memset(&s, 0, sizeof s);
    assert_ok(tf_cublaslt_enqueue(rt, record, &s));
    INJECT("cublasLtDestroy", 1, CUBLAS_STATUS_INTERNAL_ERROR, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "cublasLtDestroy failed: CUBLAS_STATUS_INTERNAL_ERROR (14)"));
    assert_int_equal(tfd()->tfd_live(TFD_DEVICE_ALLOCS), 0); /* the workspace went anyway */
    assert_null(raw_current_context());
    test_leaves_live(TFD_CUBLAS_HANDLES, 1); /* the handle cuBLASLt refused to destroy */
}

/* A stream teardown cannot synchronize may still run work that uses the
 * handle and workspace: both are leaked, not destroyed under it. */
static void teardown_sync_failure_leaks_the_handle(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    struct seen s;
    memset(&s, 0, sizeof s);
    assert_ok(tf_cublaslt_enqueue(rt, record, &s));
    INJECT("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, 1);
    log_capture_start();
    assert_ok(tf_runtime_release(rt));
    (void)log_capture_stop();
    assert_int_equal(tfd()->tfd_calls("cublasLtDestroy"), 0);
    assert_int_equal(tfd()->tfd_calls("cuMemFree"), 0);
    test_leaves_live(TFD_CUBLAS_HANDLES, 1); /* the leak */
}

/* ---- a forked child ---------------------------------------------------------- */

static tf_runtime *g_parent;

static int child_is_refused(void *arg) {
    struct seen *s = arg;
    if (tf_cublaslt_enqueue(g_parent, record, s) != TF_ERROR_RUNTIME_STATE) return 1;
    if (!strstr(tf_last_error_message(), "fork")) return 1;
    return s->calls == 0 ? 0 : 1;
}

static void forked_child_is_refused(void **state) {
    struct seen s;
    (void)state;
    g_parent = new_runtime();
    require_cublaslt(g_parent);
    memset(&s, 0, sizeof s);
    assert_ok(tf_cublaslt_enqueue(g_parent, record, &s));
    s.calls = 0;
    assert_int_equal(forked_child_passes(child_is_refused, &s), 0);
    assert_ok(tf_cublaslt_enqueue(g_parent, record, &s)); /* the parent goes on */
    assert_ok(tf_runtime_release(g_parent));
}

/* ---- a matmul with a cached plan, run and captured ------------------------- */

#define LT_FN(name) __typeof__(name) *name##_p
struct lt_api {
    LT_FN(cublasLtMatmulDescCreate);
    LT_FN(cublasLtMatmulDescDestroy);
    LT_FN(cublasLtMatrixLayoutCreate);
    LT_FN(cublasLtMatrixLayoutDestroy);
    LT_FN(cublasLtMatmulPreferenceCreate);
    LT_FN(cublasLtMatmulPreferenceDestroy);
    LT_FN(cublasLtMatmulPreferenceSetAttribute);
    LT_FN(cublasLtMatmulAlgoGetHeuristic);
    LT_FN(cublasLtMatmul);
};

/* ISO C converts no data pointer to a function pointer: copy the bits. */
static void lt_symbol(const char *name, void *out) {
    void *f = NULL;
    assert_ok(tf_cublaslt_symbol(name, &f));
    memcpy(out, &f, sizeof f);
}

static void load_lt_api(struct lt_api *a) {
#define LT_LOAD(name) lt_symbol(#name, &a->name##_p)
    LT_LOAD(cublasLtMatmulDescCreate);
    LT_LOAD(cublasLtMatmulDescDestroy);
    LT_LOAD(cublasLtMatrixLayoutCreate);
    LT_LOAD(cublasLtMatrixLayoutDestroy);
    LT_LOAD(cublasLtMatmulPreferenceCreate);
    LT_LOAD(cublasLtMatmulPreferenceDestroy);
    LT_LOAD(cublasLtMatmulPreferenceSetAttribute);
    LT_LOAD(cublasLtMatmulAlgoGetHeuristic);
    LT_LOAD(cublasLtMatmul);
#undef LT_LOAD
}

/* C = A B, n x n float, column-major, with a plan made at the first call
 * and reused (what the header recommends). */
struct matmul {
    struct lt_api api;
    int n;
    uint64_t a, b, c;
    void *planned_on; /* the handle the plan was made with */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t layout;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t result;
    int plans;
};

static int32_t make_plan(struct matmul *m, void *handle, uint64_t workspace_bytes) {
    const struct lt_api *a = &m->api;
    int found = 0;
    cublasStatus_t st = a->cublasLtMatmulDescCreate_p(&m->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (!st) st = a->cublasLtMatrixLayoutCreate_p(&m->layout, CUDA_R_32F, m->n, m->n, m->n);
    if (!st) st = a->cublasLtMatmulPreferenceCreate_p(&m->pref);
    if (!st)
        st = a->cublasLtMatmulPreferenceSetAttribute_p(m->pref,
                                                       CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                       &workspace_bytes, sizeof workspace_bytes);
    if (!st)
        st = a->cublasLtMatmulAlgoGetHeuristic_p(handle, m->desc, m->layout, m->layout, m->layout,
                                                 m->layout, m->pref, 1, &m->result, &found);
    if (!st && found == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
    m->planned_on = handle;
    m->plans++;
    return (int32_t)st;
}

static int32_t matmul_call(void *handle, void *stream, uint64_t workspace, uint64_t workspace_bytes,
                           void *user_data) {
    struct matmul *m = user_data;
    const float one = 1.0f, zero = 0.0f;
    if (m->planned_on != handle) {
        int32_t st = make_plan(m, handle, workspace_bytes);
        if (st) return st;
    }
    return (int32_t)m->api.cublasLtMatmul_p(
        handle, m->desc, &one, (const void *)(uintptr_t)m->a, m->layout,
        (const void *)(uintptr_t)m->b, m->layout, &zero, (const void *)(uintptr_t)m->c, m->layout,
        (void *)(uintptr_t)m->c, m->layout, &m->result.algo, (void *)(uintptr_t)workspace,
        (size_t)workspace_bytes, (cudaStream_t)stream);
}

static void free_plan(struct matmul *m) {
    m->api.cublasLtMatmulPreferenceDestroy_p(m->pref);
    m->api.cublasLtMatrixLayoutDestroy_p(m->layout);
    m->api.cublasLtMatmulDescDestroy_p(m->desc);
}

enum { kN = 8 };

static void fill(float *x, int seed) {
    int i;
    for (i = 0; i < kN * kN; ++i) x[i] = (float)((i * 7 + seed * 3) % 11 - 5);
}

/* Small integers: every product is exact, so C is compared bit for bit. */
static void host_product(const float *a, const float *b, float *c) {
    int row, col, k;
    for (col = 0; col < kN; ++col)
        for (row = 0; row < kN; ++row) {
            float sum = 0;
            for (k = 0; k < kN; ++k) sum += a[row + k * kN] * b[k + col * kN];
            c[row + col * kN] = sum;
        }
}

static void setup_matmul(tf_runtime *rt, struct matmul *m, const float *a, const float *b) {
    const size_t bytes = sizeof(float) * kN * kN;
    memset(m, 0, sizeof *m);
    load_lt_api(&m->api);
    m->n = kN;
    assert_ok(tf_alloc(rt, bytes, &m->a));
    assert_ok(tf_alloc(rt, bytes, &m->b));
    assert_ok(tf_alloc(rt, bytes, &m->c));
    assert_ok(tf_upload(rt, a, m->a, bytes));
    assert_ok(tf_upload(rt, b, m->b, bytes));
}

static void teardown_matmul(tf_runtime *rt, struct matmul *m) {
    free_plan(m);
    assert_ok(tf_free(rt, m->a));
    assert_ok(tf_free(rt, m->b));
    assert_ok(tf_free(rt, m->c));
}

static void matmul_with_a_cached_plan_matches_the_host(void **state) {
    tf_runtime *rt = new_runtime();
    float a[kN * kN], b[kN * kN], want[kN * kN], got[kN * kN];
    struct matmul m;
    (void)state;
    require_cublaslt(rt);
    fill(a, 1);
    fill(b, 2);
    host_product(a, b, want);
    setup_matmul(rt, &m, a, b);
    assert_ok(tf_cublaslt_enqueue(rt, matmul_call, &m));
    assert_ok(tf_download(rt, m.c, got, sizeof got));
    assert_memory_equal(got, want, sizeof got);
    fill(b, 5); /* the same plan, other operands */
    assert_ok(tf_upload(rt, b, m.b, sizeof b));
    host_product(a, b, want);
    assert_ok(tf_cublaslt_enqueue(rt, matmul_call, &m));
    assert_ok(tf_download(rt, m.c, got, sizeof got));
    assert_memory_equal(got, want, sizeof got);
    assert_int_equal(m.plans, 1);
    teardown_matmul(rt, &m);
    assert_ok(tf_runtime_release(rt));
}

/* Inside a capture the matmul is captured, not run, and the slot's first
 * call makes its handle and workspace there (relaxed capture mode); each
 * launch runs it on the operands as they are then. */
static void matmul_is_captured(void **state) {
    tf_runtime *rt = new_runtime();
    float a[kN * kN], b[kN * kN], want[kN * kN], got[kN * kN], zero[kN * kN];
    struct matmul m;
    tf_graph *graph = NULL;
    (void)state;
    require_cublaslt(rt);
    fill(a, 3);
    fill(b, 4);
    memset(zero, 0, sizeof zero);
    setup_matmul(rt, &m, a, b);
    assert_ok(tf_upload(rt, zero, m.c, sizeof zero));
    assert_ok(tf_graph_capture_begin(rt));
    assert_ok(tf_cublaslt_enqueue(rt, matmul_call, &m));
    assert_ok(tf_graph_capture_end(rt, &graph));
    assert_ok(tf_download(rt, m.c, got, sizeof got));
    assert_memory_equal(got, zero, sizeof got); /* not run by the capture */
    host_product(a, b, want);
    assert_ok(tf_graph_launch(rt, graph));
    assert_ok(tf_download(rt, m.c, got, sizeof got));
    assert_memory_equal(got, want, sizeof got);
    fill(a, 6);
    assert_ok(tf_upload(rt, a, m.a, sizeof a));
    host_product(a, b, want);
    assert_ok(tf_graph_launch(rt, graph));
    assert_ok(tf_download(rt, m.c, got, sizeof got));
    assert_memory_equal(got, want, sizeof got);
    assert_ok(tf_graph_release(graph));
    teardown_matmul(rt, &m);
    assert_ok(tf_runtime_release(rt));
}

/* ---- loading cuBLASLt (each case in a fresh child) ------------------------- */

static int lt_missing_with(tf_status expected, const char *fragment) {
    tf_runtime *rt = NULL;
    struct seen s;
    void *f = NULL;
    int32_t version = 0;
    memset(&s, 0, sizeof s);
    SCENARIO_CHECK(tf_runtime_new(0, &rt) == TF_OK);
    SCENARIO_CHECK(tf_cublaslt_enqueue(rt, record, &s) == expected);
    SCENARIO_CHECK(strcmp(tf_last_error_operation(), "tf_cublaslt_enqueue") == 0);
    SCENARIO_CHECK(strstr(tf_last_error_message(), fragment) != NULL);
    SCENARIO_CHECK(s.calls == 0);
    SCENARIO_CHECK(raw_current_context() == NULL);
    SCENARIO_CHECK(tf_cublaslt_symbol("cublasLtMatmul", &f) == expected && f == NULL);
    SCENARIO_CHECK(strstr(tf_last_error_message(), fragment) != NULL);
    /* The failure is final, and cuBLAS is another library. */
    SCENARIO_CHECK(tf_cublaslt_enqueue(rt, record, &s) == expected);
    SCENARIO_CHECK(tf_cublas_version(&version) == TF_OK && version > 0);
    SCENARIO_CHECK(tf_runtime_sync(rt) == TF_OK);
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    return 0;
}

static int lt_override_missing(void) {
    return lt_missing_with(TF_ERROR_LIBRARY_NOT_FOUND,
                           "TENFERRO_GPU_CUBLASLT=/nonexistent/libcublasLt.so.13");
}

static int lt_override_relative(void) {
    return lt_missing_with(TF_ERROR_LIBRARY_NOT_FOUND,
                           "TENFERRO_GPU_CUBLASLT must be an absolute path");
}

static int lt_not_on_the_path(void) {
    return lt_missing_with(TF_ERROR_LIBRARY_NOT_FOUND, "libcublasLt.so.13");
}

/* A library without cublasLtCreate (cuBLAS's own file named by mistake). */
static int lt_lacks_create(void) {
    return lt_missing_with(TF_ERROR_NOT_SUPPORTED, "cublasLtCreate");
}

/* The override's file is the one loaded: its functions are the ones handed out. */
static int lt_override_is_used(void) {
    tf_runtime *rt = NULL;
    struct seen s;
    void *f = NULL;
    Dl_info info;
    const char *want = getenv("TENFERRO_GPU_CUBLASLT");
    memset(&s, 0, sizeof s);
    SCENARIO_CHECK(tf_runtime_new(0, &rt) == TF_OK);
    SCENARIO_CHECK(tf_cublaslt_enqueue(rt, record, &s) == TF_OK && s.calls == 1);
    SCENARIO_CHECK(tf_cublaslt_symbol("cublasLtCreate", &f) == TF_OK);
    SCENARIO_CHECK(dladdr(f, &info) != 0 && strcmp(info.dli_fname, want) == 0);
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    return 0;
}

static const struct child_scenario scenarios[] = {
    {"lt_override_missing", lt_override_missing}, {"lt_override_relative", lt_override_relative},
    {"lt_not_on_the_path", lt_not_on_the_path},   {"lt_lacks_create", lt_lacks_create},
    {"lt_override_is_used", lt_override_is_used}, {NULL, NULL},
};

static void a_missing_override_is_reported(void **state) {
    const char *missing[] = {"TENFERRO_GPU_CUBLASLT=/nonexistent/libcublasLt.so.13", NULL};
    const char *relative[] = {"TENFERRO_GPU_CUBLASLT=libcublasLt.so.13", NULL};
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(run_child("lt_override_missing", missing), 0);
    assert_int_equal(run_child("lt_override_relative", relative), 0);
}

/* The double's folder, where libcublas.so.13 and libcublasLt.so.13 lie. */
static void double_dir(char *dir) {
    assert_non_null(realpath(double_link_path(), dir));
    *strrchr(dir, '/') = '\0';
}

static void a_library_without_the_functions_is_refused(void **state) {
    char dir[PATH_MAX], var[PATH_MAX + 64];
    const char *env[] = {var, NULL};
    (void)state;
    REQUIRE_DOUBLE();
    double_dir(dir);
    snprintf(var, sizeof var, "TENFERRO_GPU_CUBLASLT=%s/libcublas.so.13", dir);
    assert_int_equal(run_child("lt_lacks_create", env), 0);
}

/* A copy of the double's cuBLASLt under another name, named by the override. */
static void an_absolute_override_is_used(void **state) {
    char dir[PATH_MAX], tmp[] = "/tmp/tf-cublaslt-XXXXXX", target[PATH_MAX + 32], link[PATH_MAX],
                        var[PATH_MAX + 64];
    const char *env[] = {var, NULL};
    (void)state;
    REQUIRE_DOUBLE();
    double_dir(dir);
    assert_non_null(mkdtemp(tmp));
    snprintf(target, sizeof target, "%s/libcublasLt.so.13", dir);
    snprintf(link, sizeof link, "%s/libmy-cublaslt.so", tmp);
    assert_int_equal(symlink(target, link), 0);
    snprintf(var, sizeof var, "TENFERRO_GPU_CUBLASLT=%s", link);
    assert_int_equal(run_child("lt_override_is_used", env), 0);
    unlink(link);
    rmdir(tmp);
}

/* A library path with the driver and cuBLAS doubles but no cuBLASLt. */
static void soname_search_without_cublaslt(void **state) {
    char dir[PATH_MAX], tmp[] = "/tmp/tf-no-cublaslt-XXXXXX", target[PATH_MAX + 32], link[PATH_MAX];
    const char *names[] = {"libcuda.so.1", "libcublas.so.13"};
    size_t i;
    (void)state;
    REQUIRE_DOUBLE();
    double_dir(dir);
    assert_non_null(mkdtemp(tmp));
    for (i = 0; i < 2; ++i) {
        snprintf(target, sizeof target, "%s/%s", dir, names[i]);
        snprintf(link, sizeof link, "%s/%s", tmp, names[i]);
        assert_int_equal(symlink(target, link), 0);
    }
    assert_int_equal(run_child_with_loader("lt_not_on_the_path", NULL, tmp), 0);
    for (i = 0; i < 2; ++i) {
        snprintf(link, sizeof link, "%s/%s", tmp, names[i]);
        unlink(link);
    }
    rmdir(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(handle_is_made_once_and_reused),
        TF_TEST(warm_enqueue_makes_only_the_calls_it_needs),
        TF_TEST(each_slot_has_its_own_handle_and_workspace),
        TF_TEST(workspace_is_shared_with_cublas),
        TF_TEST(no_workspace_when_the_options_say_0),
        TF_TEST(bad_arguments_are_refused),
        TF_TEST(symbols_come_from_the_loaded_cublaslt),
        TF_TEST(create_failure),
        TF_TEST(workspace_allocation_failure_destroys_the_handle),
        TF_TEST(half_made_handle_destroy_failure_is_logged),
        TF_TEST(callback_status_is_a_provider_error),
        TF_TEST(reentry_is_refused_not_deadlocked),
        TF_TEST(teardown_destroy_failure_is_logged),
        TF_TEST(teardown_sync_failure_leaks_the_handle),
        TF_TEST(forked_child_is_refused),
        TF_TEST(matmul_with_a_cached_plan_matches_the_host),
        TF_TEST(matmul_is_captured),
        TF_TEST(a_missing_override_is_reported),
        TF_TEST(a_library_without_the_functions_is_refused),
        TF_TEST(an_absolute_override_is_used),
        TF_TEST(soname_search_without_cublaslt),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
