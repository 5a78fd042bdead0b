/* C side of the Go binding: one wrapper per fallible tf_* function.
 *
 * Why wrappers: the library records a failure in thread-local storage, and
 * a goroutine may move to another OS thread between two cgo calls.  Each
 * wrapper makes the call and, on failure, copies the thread's record with
 * tf_last_error() before returning, all inside ONE cgo call, so the copy is
 * always taken on the thread that failed.  (runtime.LockOSThread around two
 * cgo calls would also work, but costs a second cgo call and a lock/unlock
 * on every call, failing or not; a wrapper costs nothing on success.)
 *
 * A wrapper returns NULL on success, or a tf_error_info the caller owns and
 * frees with tfgo_error_free().
 *
 * To bind a new fallible function, add one line to TFGO_FALLIBLE:
 *     X(tf_name, (parameters), (arguments))
 * and call C.go_tf_name from Go. */
#ifndef TFGO_SHIM_H
#define TFGO_SHIM_H

#include <stdint.h>
#include <stdlib.h>

#include <tenferro_gpu.h>

#define TFGO_FALLIBLE(X)                                                          \
    /* devices */                                                                 \
    X(tf_device_count, (int32_t *out_count), (out_count))                         \
    X(tf_device_info, (int32_t ordinal, tf_device_properties *out), (ordinal, out)) \
    /* runtime lifecycle */                                                       \
    X(tf_runtime_new, (int32_t ordinal, tf_runtime **out), (ordinal, out))        \
    X(tf_runtime_new_with_options,                                                \
      (int32_t ordinal, const tf_runtime_options *options, tf_runtime **out),     \
      (ordinal, options, out))                                                    \
    X(tf_runtime_retain, (tf_runtime *rt), (rt))                                  \
    X(tf_runtime_release, (tf_runtime *rt), (rt))                                 \
    X(tf_runtime_bind_slot, (tf_runtime *rt, int32_t slot, tf_runtime **out),     \
      (rt, slot, out))                                                            \
    /* runtime queries */                                                         \
    X(tf_runtime_identity, (const tf_runtime *rt, uint64_t *out), (rt, out))      \
    X(tf_runtime_allocation_domain, (const tf_runtime *rt, uint64_t *out),        \
      (rt, out))                                                                  \
    X(tf_runtime_device_info, (const tf_runtime *rt, tf_device_properties *out),  \
      (rt, out))                                                                  \
    X(tf_runtime_supports,                                                        \
      (const tf_runtime *rt, int32_t capability, int32_t *out_supported),         \
      (rt, capability, out_supported))                                            \
    X(tf_runtime_primary_context, (const tf_runtime *rt, void **out_context),     \
      (rt, out_context))                                                          \
    X(tf_runtime_slot_count, (const tf_runtime *rt, int32_t *out_count),          \
      (rt, out_count))                                                            \
    X(tf_runtime_current_slot, (const tf_runtime *rt, int32_t *out_slot),         \
      (rt, out_slot))                                                             \
    X(tf_runtime_stream, (tf_runtime *rt, void **out_stream), (rt, out_stream))   \
    X(tf_runtime_slot_stream, (tf_runtime *rt, int32_t slot, void **out_stream),  \
      (rt, slot, out_stream))                                                     \
    X(tf_runtime_sync, (tf_runtime *rt), (rt))                                    \
    /* callbacks: `callback` is a runtime/cgo.Handle, see shim.c */               \
    X(tf_with_context, (tf_runtime *rt, uintptr_t callback),                      \
      (rt, tfgo_context_trampoline, (void *)callback))                            \
    X(tf_set_log_callback, (uintptr_t callback),                                  \
      (callback ? tfgo_log_trampoline : NULL, (void *)callback))

#define TFGO_DECLARE(fn, params, args) tf_error_info *go_##fn params;
TFGO_FALLIBLE(TFGO_DECLARE)
#undef TFGO_DECLARE

/* Frees what a wrapper returned (NULL is ignored). */
void tfgo_error_free(tf_error_info *info);

/* 1 while the calling thread runs the Go log callback (see log.go). */
int tfgo_in_log_callback(void);

#endif
