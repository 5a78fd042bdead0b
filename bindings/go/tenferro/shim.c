/* Wrappers declared in shim.h and the C ends of the Go callbacks. */
#include <stdio.h>

#include "shim.h"
#include "_cgo_export.h" /* the tfgo* functions exported by callbacks.go and log.go */

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
    tf_error_info_init(info, sizeof *info);
    if (tf_last_error(info) != TF_OK || info->status != status) {
        /* The library left no matching record: say so rather than report
         * an older, unrelated failure. */
        tf_error_info_init(info, sizeof *info);
        info->status = status;
        snprintf(info->message, sizeof info->message,
                 "%s (the library recorded no matching error)", tf_status_string(status));
    }
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

#define TFGO_DEFINE(fn, params, args)                     \
    tf_error_info *go_##fn params {                       \
        tf_status status = fn args;                       \
        return status == TF_OK ? NULL : tfgo_capture(status); \
    }
TFGO_FALLIBLE(TFGO_DEFINE)
#undef TFGO_DEFINE

/* cuBLAS's GEMM prototypes with its enums and handle spelled as what they
 * are in its ABI (int, pointer): cublasSgemm_v2(handle, transa, transb, m,
 * n, k, alpha, A, lda, B, ldb, beta, C, ldc). */
#define TFGO_GEMM(name, T)                                                                   \
    typedef int (*name##_fn)(void *, int, int, int, int, int, const T *, const T *, int,      \
                             const T *, int, const T *, T *, int);                           \
    int32_t tfgo_##name(void *fn, void *handle, int32_t transa, int32_t transb, int32_t m,   \
                        int32_t n, int32_t k, const T *alpha, uint64_t alpha_dev, uint64_t a, \
                        int32_t lda, uint64_t b, int32_t ldb, const T *beta, uint64_t beta_dev, \
                        uint64_t c, int32_t ldc) {                                           \
        const T *al = alpha ? alpha : (const T *)(uintptr_t)alpha_dev;                       \
        const T *be = beta ? beta : (const T *)(uintptr_t)beta_dev;                          \
        return ((name##_fn)fn)(handle, transa, transb, m, n, k, al, (const T *)(uintptr_t)a, \
                               lda, (const T *)(uintptr_t)b, ldb, be, (T *)(uintptr_t)c, ldc); \
    }
TFGO_GEMM(sgemm, float)
TFGO_GEMM(dgemm, double)
#undef TFGO_GEMM
