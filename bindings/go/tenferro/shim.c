/* SPDX-License-Identifier: MIT OR Apache-2.0 */
//go:build cgo

/* The table and wrappers declared in shim.h, the loader, and the C ends of
 * the Go callbacks. */
#define _GNU_SOURCE /* secure_getenv, dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"
#include "_cgo_export.h" /* the tfgo* functions exported by the *_cgo.go files */

/* A wrapper whose arguments do not match the header's prototype is a bug
 * of the list in shim.h: make it a compile error whatever the flags. */
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
#pragma GCC diagnostic error "-Wint-conversion"
#ifdef __clang__
#pragma GCC diagnostic error "-Wincompatible-pointer-types-discards-qualifiers"
#else
#pragma GCC diagnostic error "-Wdiscarded-qualifiers"
#endif

#ifdef TFGO_LINKED
#define TFGO_FN(fn) fn
#else
/* Every listed function, typed as the header declares it.  Written once by
 * tfgo_load() before any wrapper runs (Go's sync.Once orders the two). */
#define TFGO_MEMBER_F(fn, params, args) __typeof__(&fn) fn;
#define TFGO_MEMBER_R(type, fn, params, args) __typeof__(&fn) fn;
#define TFGO_MEMBER_O(since, fn, params, args) __typeof__(&fn) fn; /* NULL: missing */
static struct tfgo_table {
    TFGO_FUNCTIONS(TFGO_MEMBER_F, TFGO_MEMBER_R, TFGO_MEMBER_F, TFGO_MEMBER_O, TFGO_MEMBER_O)
} tfgo_api;
#undef TFGO_MEMBER_F
#undef TFGO_MEMBER_R
#undef TFGO_MEMBER_O
#define TFGO_FN(fn) tfgo_api.fn
#endif

static char tfgo_path[4096];

/* Where the loaded tf_version came from. */
static void tfgo_note_path(void *fn) {
    Dl_info info;
    memset(&info, 0, sizeof info);
    if (dladdr(fn, &info) != 0 && info.dli_fname != NULL)
        snprintf(tfgo_path, sizeof tfgo_path, "%s", info.dli_fname);
}

const char *tfgo_library_path(void) { return tfgo_path; }

/* The loaded library must speak this header's ABI: same major version. */
static int tfgo_check_version(uint32_t version, const char *where, char *why, size_t cap) {
    if (version / 10000 == TF_VERSION_MAJOR) return 0;
    snprintf(why, cap, "%s is version %u.%u.%u; this program needs %d.x (it was built with %s)",
             where, version / 10000, version / 100 % 100, version % 100, TF_VERSION_MAJOR,
             TF_VERSION_STRING);
    return -1;
}

#ifdef TFGO_LINKED
int tfgo_load(char *why, size_t cap) {
    tfgo_note_path((void *)&tf_version);
    return tfgo_check_version(tf_version(), "the linked libtenferro_gpu", why, cap);
}
#else
#define TFGO_SONAME "libtenferro_gpu.so.1"
#define TFGO_ENV "TENFERRO_GPU_LIBRARY"

/* Which file to open: the override (refused when relative, as the C
 * library refuses a relative TENFERRO_GPU_CUDA_DRIVER), else the SONAME. */
static const char *tfgo_library_file(char *why, size_t cap) {
    const char *path = secure_getenv(TFGO_ENV);
    if (path == NULL || path[0] == '\0') return TFGO_SONAME;
    if (path[0] != '/') {
        snprintf(why, cap, "%s=%s is not an absolute path; nothing was loaded (give the full path of %s)",
                 TFGO_ENV, path, TFGO_SONAME);
        return NULL;
    }
    return path;
}

/* Why the dlopen of `file` failed, where it looked and what to do next (as
 * the Python binding's LoadError says). */
static void tfgo_say_where(char *why, size_t cap, const char *file, const char *err) {
    const char *path = getenv("LD_LIBRARY_PATH");
    if (strcmp(file, TFGO_SONAME) != 0) {
        snprintf(why, cap, "%s; %s=%s is the only place tried: correct it, or unset it to search "
                 "the loader's path for %s", err ? err : file, TFGO_ENV, file, TFGO_SONAME);
        return;
    }
    snprintf(why, cap, "%s; tried %s (not set) and the dynamic loader's search for %s (the "
             "program's RUNPATH, LD_LIBRARY_PATH=%s, the ldconfig cache, the system folders): "
             "install tenferro-gpu (make install; then ldconfig as root, or add its lib folder to "
             "LD_LIBRARY_PATH), or set %s to its absolute path",
             err ? err : file, TFGO_ENV, TFGO_SONAME, path && path[0] ? path : "(not set)", TFGO_ENV);
}

int tfgo_load(char *why, size_t cap) {
    const char *file = tfgo_library_file(why, cap);
    if (file == NULL) return -1;
    void *lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        tfgo_say_where(why, cap, file, dlerror());
        return -1;
    }
    struct tfgo_table table;
    const char *missing = NULL;
#define TFGO_RESOLVE_F(fn, params, args)                   \
    if ((*(void **)&table.fn = dlsym(lib, #fn)) == NULL && \
        missing == NULL)                                   \
        missing = #fn;
#define TFGO_RESOLVE_R(type, fn, params, args) TFGO_RESOLVE_F(fn, params, args)
    /* An optional function may be absent: its wrapper reports it. */
#define TFGO_RESOLVE_O(since, fn, params, args) *(void **)&table.fn = dlsym(lib, #fn);
    TFGO_FUNCTIONS(TFGO_RESOLVE_F, TFGO_RESOLVE_R, TFGO_RESOLVE_F, TFGO_RESOLVE_O, TFGO_RESOLVE_O)
#undef TFGO_RESOLVE_F
#undef TFGO_RESOLVE_R
#undef TFGO_RESOLVE_O
    if (missing != NULL) {
        snprintf(why, cap, "%s lacks %s: it is not a complete tenferro-gpu %d.x library",
                 file, missing, TF_VERSION_MAJOR);
        dlclose(lib);
        return -1;
    }
    if (tfgo_check_version(table.tf_version(), file, why, cap) != 0) {
        dlclose(lib);
        return -1;
    }
    tfgo_api = table;
    tfgo_note_path((void *)table.tf_version);
    return 0; /* never closed: the process may hold its objects until exit */
}
#endif

/* What a wrapper returns when even the copy of the error cannot be
 * allocated; never freed. */
static tf_error_info tfgo_oom_record = {
    sizeof(tf_error_info), TF_ERROR_OUT_OF_MEMORY, TF_CODE_NONE, 0, "", "",
    "tenferro Go binding: no memory to copy the error record"};

/* The thread's record of the failure that just returned `status`.
 * INVARIANT: called on the thread that made the failing call, before any
 * other call of the library on it. */
static tf_error_info *tfgo_capture(tf_status status) {
    tf_error_info *info = malloc(sizeof *info);
    if (info == NULL) return &tfgo_oom_record;
    TFGO_FN(tf_error_info_init)(info, sizeof *info);
    if (TFGO_FN(tf_last_error)(info) != TF_OK || info->status != status) {
        /* The library left no matching record: say so rather than report
         * an older, unrelated failure. */
        TFGO_FN(tf_error_info_init)(info, sizeof *info);
        info->status = status;
        snprintf(info->message, sizeof info->message,
                 "%s (the library recorded no matching error)", TFGO_FN(tf_status_string)(status));
    }
    return info;
}

/* The record of a call of optional function `fn`, added in version
 * `since`, that the loaded library lacks.  Never NULL. */
static tf_error_info *tfgo_missing(const char *fn, const char *since) {
    tf_error_info *info = malloc(sizeof *info);
    if (info == NULL) return &tfgo_oom_record;
    TFGO_FN(tf_error_info_init)(info, sizeof *info);
    info->status = TF_ERROR_NOT_SUPPORTED;
    snprintf(info->operation, sizeof info->operation, "%s", fn);
    snprintf(info->call, sizeof info->call, "dlsym");
    snprintf(info->message, sizeof info->message,
             "%s: the loaded libtenferro_gpu (%s, %s) is too old: %s is new in %s", fn,
             TFGO_FN(tf_version_string)(), tfgo_path, fn, since);
    return info;
}

void tfgo_error_free(tf_error_info *info) {
    if (info != &tfgo_oom_record) free(info);
}

/* The library calls these; they hand over to Go with the cgo.Handle that
 * travels as user_data.  Go never lets a panic unwind through them. */
static int32_t tfgo_context_trampoline(void *user_data) {
    return tfgoRunContext((uintptr_t)user_data);
}

static int32_t tfgo_cublas_trampoline(void *cublas_handle, void *stream, void *user_data) {
    return tfgoRunCublas((uintptr_t)user_data, cublas_handle, stream);
}

static int32_t tfgo_stream_trampoline(void *stream, void *user_data) {
    return tfgoRunStream((uintptr_t)user_data, stream);
}

static void tfgo_release_trampoline(void *resource, void *user_data) {
    (void)resource; /* the Go closure carries what it frees */
    tfgoRunRelease((uintptr_t)user_data);
}

static __thread int tfgo_in_log;

static void tfgo_log_trampoline(int32_t level, const char *message, void *user_data) {
    int outer = tfgo_in_log; /* a log line may be logged from inside one */
    tfgo_in_log = 1;
    tfgoLog((uintptr_t)user_data, level, (char *)message);
    tfgo_in_log = outer;
}

int tfgo_in_log_callback(void) { return tfgo_in_log; }

#define TFGO_DEFINE_F(fn, params, args)                       \
    tf_error_info *go_##fn params {                           \
        tf_status status = TFGO_FN(fn) args;                  \
        return status == TF_OK ? NULL : tfgo_capture(status); \
    }
#define TFGO_DEFINE_R(type, fn, params, args) \
    type go_##fn params { return TFGO_FN(fn) args; }
#define TFGO_DEFINE_V(fn, params, args) \
    void go_##fn params { TFGO_FN(fn) args; }
#ifdef TFGO_LINKED
/* Linked: the dynamic loader found every function at start-up. */
#define TFGO_PRESENT(fn) 1
#else
#define TFGO_PRESENT(fn) (tfgo_api.fn != NULL)
#endif
#define TFGO_DEFINE_OF(since, fn, params, args)                 \
    tf_error_info *go_##fn params {                             \
        if (!TFGO_PRESENT(fn)) return tfgo_missing(#fn, since); \
        tf_status status = TFGO_FN(fn) args;                    \
        return status == TF_OK ? NULL : tfgo_capture(status);   \
    }
#define TFGO_DEFINE_OV(since, fn, params, args)                 \
    tf_error_info *go_##fn params {                             \
        if (!TFGO_PRESENT(fn)) return tfgo_missing(#fn, since); \
        TFGO_FN(fn) args;                                       \
        return NULL;                                            \
    }
TFGO_FUNCTIONS(TFGO_DEFINE_F, TFGO_DEFINE_R, TFGO_DEFINE_V, TFGO_DEFINE_OF, TFGO_DEFINE_OV)
#undef TFGO_DEFINE_F
#undef TFGO_DEFINE_R
#undef TFGO_DEFINE_V
#undef TFGO_DEFINE_OF
#undef TFGO_DEFINE_OV

/* See shim.h.  The queries run after the copy's record was taken, so
 * their own records cannot replace it. */
static tfgo_copy_result tfgo_copy_noted(tf_runtime *rt, tf_error_info *err, const void *host) {
    tfgo_copy_result r = {err, TF_ERROR_INVALID_ARGUMENT, -1};
    if (err == NULL || err->status == TF_ERROR_INVALID_ARGUMENT) return r; /* nothing queued */
    tf_error_info *use = go_tf_host_record_use(rt, (void *)host);
    r.recorded = use == NULL ? TF_OK : use->status;
    tfgo_error_free(use);
    tf_error_info *slot = go_tf_runtime_current_slot(rt, &r.slot);
    if (slot != NULL) r.slot = -1;
    tfgo_error_free(slot);
    return r;
}

tfgo_copy_result tfgo_download(tf_runtime *rt, uint64_t src, void *dst, size_t len) {
    return tfgo_copy_noted(rt, go_tf_download(rt, src, dst, len), dst);
}

tfgo_copy_result tfgo_upload(tf_runtime *rt, const void *src, uint64_t dst, size_t len) {
    return tfgo_copy_noted(rt, go_tf_upload(rt, src, dst, len), src);
}

/* cuBLAS's GEMM prototypes with its enums and handle spelled as what they
 * are in its ABI (int, pointer): cublasSgemm_v2(handle, transa, transb, m,
 * n, k, alpha, A, lda, B, ldb, beta, C, ldc). */
#define TFGO_GEMM(name, T)                                                                    \
    typedef int (*name##_fn)(void *, int, int, int, int, int, const T *, const T *, int,       \
                             const T *, int, const T *, T *, int);                            \
    static int32_t tfgo_##name(void *fn, void *handle, int32_t transa, int32_t transb,        \
                               int32_t m, int32_t n, int32_t k, const void *alpha,            \
                               uint64_t alpha_dev, uint64_t a, int32_t lda, uint64_t b,       \
                               int32_t ldb, const void *beta, uint64_t beta_dev, uint64_t c,  \
                               int32_t ldc) {                                                 \
        const T *al = alpha ? (const T *)alpha : (const T *)(uintptr_t)alpha_dev;             \
        const T *be = beta ? (const T *)beta : (const T *)(uintptr_t)beta_dev;                \
        return ((name##_fn)fn)(handle, transa, transb, m, n, k, al, (const T *)(uintptr_t)a,  \
                               lda, (const T *)(uintptr_t)b, ldb, be, (T *)(uintptr_t)c, ldc); \
    }
TFGO_GEMM(sgemm, float)
TFGO_GEMM(dgemm, double)
#undef TFGO_GEMM

int32_t tfgo_gemm(int is_double, void *fn, void *handle, int32_t transa, int32_t transb,
                  int32_t m, int32_t n, int32_t k, const void *alpha, uint64_t alpha_dev,
                  uint64_t a, int32_t lda, uint64_t b, int32_t ldb, const void *beta,
                  uint64_t beta_dev, uint64_t c, int32_t ldc) {
    return (is_double ? tfgo_dgemm : tfgo_sgemm)(fn, handle, transa, transb, m, n, k, alpha,
                                                 alpha_dev, a, lda, b, ldb, beta, beta_dev, c,
                                                 ldc);
}
