/* Wrappers declared in shim.h and the C ends of the Go callbacks. */
#include <stdio.h>

#include "shim.h"
#include "_cgo_export.h" /* tfgoRunContextCallback, tfgoLog */

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
    tf_error_info_init(info);
    if (tf_last_error(info) != TF_OK || info->status != status) {
        /* The library left no matching record: say so rather than report
         * an older, unrelated failure. */
        tf_error_info_init(info);
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
 * travels as user_data. */
static int32_t tfgo_context_trampoline(void *user_data) {
    return tfgoRunContextCallback((uintptr_t)user_data);
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
