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
 * and call C.go_tf_name from Go.  Callbacks cross as a runtime/cgo.Handle
 * (`uintptr_t callback`) that the wrapper passes as user_data next to the
 * trampoline that hands it back to Go (shim.c). */
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
      (callback ? tfgo_log_trampoline : NULL, (void *)callback))                  \
    /* work on the slot streams */                                                \
    X(tf_cublas_enqueue, (tf_runtime *rt, int32_t pointer_mode, uintptr_t callback), \
      (rt, pointer_mode, tfgo_cublas_trampoline, (void *)callback))               \
    X(tf_cublas_symbol, (const char *name, void **out_function), (name, out_function)) \
    X(tf_cublas_version, (int32_t *out_version), (out_version))                   \
    X(tf_stream_enqueue, (tf_runtime *rt, uintptr_t callback),                    \
      (rt, tfgo_stream_trampoline, (void *)callback))                             \
    X(tf_slot_wait, (tf_runtime *rt, int32_t other_slot), (rt, other_slot))       \
    /* events */                                                                  \
    X(tf_event_new, (tf_runtime *rt, tf_event **out), (rt, out))                  \
    X(tf_event_retain, (tf_event *event), (event))                                \
    X(tf_event_release, (tf_event *event), (event))                               \
    X(tf_event_record, (tf_runtime *rt, tf_event *event), (rt, event))            \
    X(tf_event_wait, (tf_runtime *rt, tf_event *event), (rt, event))              \
    X(tf_event_synchronize, (tf_event *event), (event))                           \
    X(tf_event_query, (tf_event *event, int32_t *out_done), (event, out_done))    \
    /* workspace retirement: the resource is unused, the callback frees */        \
    X(tf_workspace_retire, (tf_runtime *rt, uintptr_t callback),                  \
      (rt, NULL, tfgo_release_trampoline, (void *)callback))                      \
    X(tf_workspace_poll, (tf_runtime *rt), (rt))                                  \
    X(tf_workspace_stats, (const tf_runtime *rt, tf_retirement_stats *out), (rt, out)) \
    /* modules and kernels */                                                     \
    X(tf_module_load, (tf_runtime *rt, const void *image, size_t size, tf_module **out), \
      (rt, image, size, out))                                                     \
    X(tf_module_retain, (tf_module *module), (module))                            \
    X(tf_module_release, (tf_module *module), (module))                           \
    X(tf_module_function, (tf_module *module, const char *name, void **out_function), \
      (module, name, out_function))                                               \
    X(tf_function_set_attribute,                                                  \
      (tf_module *module, void *function, int32_t attribute, int32_t value),      \
      (module, function, attribute, value))                                       \
    X(tf_kernel_launch,                                                           \
      (tf_runtime *rt, void *function, const tf_launch_config *config, void **args), \
      (rt, function, config, args))                                               \
    /* NVRTC */                                                                   \
    X(tf_program_compile,                                                         \
      (tf_runtime *rt, const char *source, const tf_compile_options *options,     \
       tf_program **out),                                                         \
      (rt, source, options, out))                                                 \
    X(tf_program_image, (const tf_program *program, const void **out_image, size_t *out_size), \
      (program, out_image, out_size))                                             \
    X(tf_program_log, (const tf_program *program, const char **out_log),          \
      (program, out_log))                                                         \
    /* device memory and transfers */                                             \
    X(tf_alloc, (tf_runtime *rt, size_t bytes, uint64_t *out_ptr), (rt, bytes, out_ptr)) \
    X(tf_free, (tf_runtime *rt, uint64_t ptr), (rt, ptr))                         \
    X(tf_upload, (tf_runtime *rt, const void *src, uint64_t dst, size_t len),     \
      (rt, src, dst, len))                                                        \
    X(tf_copy, (tf_runtime *rt, uint64_t src, uint64_t dst, size_t len),          \
      (rt, src, dst, len))                                                        \
    X(tf_peer_copy_available, (tf_runtime *src_rt, tf_runtime *dst_rt, int32_t *out), \
      (src_rt, dst_rt, out))                                                      \
    X(tf_peer_copy,                                                               \
      (tf_runtime *src_rt, uint64_t src, tf_runtime *dst_rt, uint64_t dst, size_t len), \
      (src_rt, src, dst_rt, dst, len))                                            \
    X(tf_download_scalar, (tf_runtime *rt, uint64_t src, void *out, size_t len),  \
      (rt, src, out, len))                                                        \
    X(tf_download, (tf_runtime *rt, uint64_t src, void *dst, size_t len),         \
      (rt, src, dst, len))

#define TFGO_DECLARE(fn, params, args) tf_error_info *go_##fn params;
TFGO_FALLIBLE(TFGO_DECLARE)
#undef TFGO_DECLARE

/* Frees what a wrapper returned (NULL is ignored). */
void tfgo_error_free(tf_error_info *info);

/* 1 while the calling thread runs the Go log callback (see log.go). */
int tfgo_in_log_callback(void);

/* cublasSgemm_v2 / cublasDgemm_v2 through the address tf_cublas_symbol()
 * gave, so Go needs no cuBLAS header or library of its own.  alpha and beta
 * are host pointers, or NULL to use alpha_dev / beta_dev, device addresses
 * (for TF_CUBLAS_POINTER_MODE_DEVICE).  Returns the cublasStatus_t. */
int32_t tfgo_sgemm(void *fn, void *handle, int32_t transa, int32_t transb, int32_t m,
                   int32_t n, int32_t k, const float *alpha, uint64_t alpha_dev, uint64_t a,
                   int32_t lda, uint64_t b, int32_t ldb, const float *beta, uint64_t beta_dev,
                   uint64_t c, int32_t ldc);
int32_t tfgo_dgemm(void *fn, void *handle, int32_t transa, int32_t transb, int32_t m,
                   int32_t n, int32_t k, const double *alpha, uint64_t alpha_dev, uint64_t a,
                   int32_t lda, uint64_t b, int32_t ldb, const double *beta, uint64_t beta_dev,
                   uint64_t c, int32_t ldc);

#endif
