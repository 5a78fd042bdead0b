/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* C side of the Go binding (cgo builds only): the one list of the library's
 * functions the binding calls, the table they are called through, and one
 * wrapper per function for Go to call.
 *
 * Loading.  By default the library is not linked: tfgo_load() opens
 * libtenferro_gpu.so.1 with dlopen at the first call that needs it and
 * resolves every function of TFGO_FUNCTIONS into a table, so a program
 * starts (and reports "not available") where the library is absent.  With
 * the build tag tenferro_linked (tfgo_linked.go defines TFGO_LINKED and
 * links -ltenferro_gpu through pkg-config) the wrappers call the functions
 * directly and the loader resolves them at start-up, as before.
 *
 * Why wrappers: the library records a failure in thread-local storage, and
 * a goroutine may move to another OS thread between two cgo calls.  Each
 * fallible wrapper makes the call and, on failure, copies the thread's
 * record with tf_last_error() before returning, all inside ONE cgo call, so
 * the copy is always taken on the thread that failed.  (runtime.LockOSThread
 * around two cgo calls would also work, but costs a second cgo call and a
 * lock/unlock on every call, failing or not; a wrapper costs nothing on
 * success.)  A fallible wrapper returns NULL on success, or a tf_error_info
 * the caller owns and frees with tfgo_error_free().
 *
 * To bind a new function, add one line to TFGO_FUNCTIONS and call
 * C.go_tf_name from Go:
 *     F(tf_name, (parameters), (arguments))        fallible: returns tf_status
 *     R(type, tf_name, (parameters), (arguments))  never fails, returns type
 *     V(tf_name, (parameters), (arguments))        never fails, returns nothing
 * and, for a function newer than 1.0 (the library may lack it):
 *     OF(since, tf_name, (parameters), (arguments))  fallible
 *     OV(since, tf_name, (parameters), (arguments))  returns nothing
 * An optional ("O") function missing from the loaded library is left NULL
 * instead of refusing the library, so a program built with a newer header
 * runs on an older 1.x library; its wrapper then returns a record with
 * TF_ERROR_NOT_SUPPORTED, call "dlsym" and a message naming the function
 * and the version that added it (OV wrappers return that record too: NULL
 * when the function ran).
 * The table's member types come from the header itself (__typeof__), and
 * shim.c turns every argument mismatch into a compile error, so the list
 * cannot drift from the header; a Go call of a function missing from the
 * list does not compile, and a direct C.tf_name call does not link in the
 * default build.  TestShimListsTheBoundFunctions checks the list against the
 * header and UNBOUND.txt.  Callbacks cross as a runtime/cgo.Handle
 * (`uintptr_t callback`) that the wrapper passes as user_data next to the
 * trampoline that hands it back to Go (shim.c). */
#ifndef TFGO_SHIM_H
#define TFGO_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <tenferro_gpu.h>

#define TFGO_FUNCTIONS(F, R, V, OF, OV)                                                 \
    /* version, errors, versioned structs */                                      \
    R(uint32_t, tf_version, (void), ())                                           \
    R(const char *, tf_version_string, (void), ())                                \
    R(const char *, tf_status_string, (tf_status status), (status))              \
    V(tf_error_info_init, (tf_error_info *info, size_t size), (info, size))       \
    R(tf_status, tf_last_error, (tf_error_info *out), (out))                      \
    V(tf_device_properties_init, (tf_device_properties *p, size_t size), (p, size)) \
    V(tf_runtime_options_init, (tf_runtime_options *o, size_t size), (o, size))   \
    V(tf_retirement_stats_init, (tf_retirement_stats *s, size_t size), (s, size)) \
    V(tf_launch_config_init, (tf_launch_config *c, size_t size), (c, size))       \
    V(tf_compile_options_init, (tf_compile_options *o, size_t size), (o, size))   \
    /* devices */                                                                 \
    R(int32_t, tf_gpu_available, (void), ())                                      \
    F(tf_device_count, (int32_t *out_count), (out_count))                         \
    F(tf_device_info, (int32_t ordinal, tf_device_properties *out), (ordinal, out)) \
    /* runtime lifecycle */                                                       \
    F(tf_runtime_new, (int32_t ordinal, tf_runtime **out), (ordinal, out))        \
    F(tf_runtime_new_with_options,                                                \
      (int32_t ordinal, const tf_runtime_options *options, tf_runtime **out),     \
      (ordinal, options, out))                                                    \
    F(tf_runtime_retain, (tf_runtime *rt), (rt))                                  \
    F(tf_runtime_release, (tf_runtime *rt), (rt))                                 \
    F(tf_runtime_bind_slot, (tf_runtime *rt, int32_t slot, tf_runtime **out),     \
      (rt, slot, out))                                                            \
    /* runtime queries */                                                         \
    F(tf_runtime_identity, (const tf_runtime *rt, uint64_t *out), (rt, out))      \
    F(tf_runtime_allocation_domain, (const tf_runtime *rt, uint64_t *out),        \
      (rt, out))                                                                  \
    F(tf_runtime_device_info, (const tf_runtime *rt, tf_device_properties *out),  \
      (rt, out))                                                                  \
    F(tf_runtime_supports,                                                        \
      (const tf_runtime *rt, int32_t capability, int32_t *out_supported),         \
      (rt, capability, out_supported))                                            \
    F(tf_runtime_primary_context, (const tf_runtime *rt, void **out_context),     \
      (rt, out_context))                                                          \
    F(tf_runtime_slot_count, (const tf_runtime *rt, int32_t *out_count),          \
      (rt, out_count))                                                            \
    F(tf_runtime_current_slot, (const tf_runtime *rt, int32_t *out_slot),         \
      (rt, out_slot))                                                             \
    F(tf_runtime_stream, (tf_runtime *rt, void **out_stream), (rt, out_stream))   \
    F(tf_runtime_slot_stream, (tf_runtime *rt, int32_t slot, void **out_stream),  \
      (rt, slot, out_stream))                                                     \
    F(tf_runtime_sync, (tf_runtime *rt), (rt))                                    \
    /* callbacks: `callback` is a runtime/cgo.Handle, see shim.c */               \
    F(tf_with_context, (tf_runtime *rt, uintptr_t callback),                      \
      (rt, tfgo_context_trampoline, (void *)callback))                            \
    F(tf_set_log_callback, (uintptr_t callback),                                  \
      (callback ? tfgo_log_trampoline : NULL, (void *)callback))                  \
    /* work on the slot streams */                                                \
    F(tf_cublas_enqueue, (tf_runtime *rt, int32_t pointer_mode, uintptr_t callback), \
      (rt, pointer_mode, tfgo_cublas_trampoline, (void *)callback))               \
    F(tf_cublas_symbol, (const char *name, void **out_function), (name, out_function)) \
    F(tf_cublas_version, (int32_t *out_version), (out_version))                   \
    F(tf_stream_enqueue, (tf_runtime *rt, uintptr_t callback),                    \
      (rt, tfgo_stream_trampoline, (void *)callback))                             \
    F(tf_slot_wait, (tf_runtime *rt, int32_t other_slot), (rt, other_slot))       \
    /* events */                                                                  \
    F(tf_event_new, (tf_runtime *rt, tf_event **out), (rt, out))                  \
    F(tf_event_retain, (tf_event *event), (event))                                \
    F(tf_event_release, (tf_event *event), (event))                               \
    F(tf_event_record, (tf_runtime *rt, tf_event *event), (rt, event))            \
    F(tf_event_wait, (tf_runtime *rt, tf_event *event), (rt, event))              \
    F(tf_event_synchronize, (tf_event *event), (event))                           \
    F(tf_event_query, (tf_event *event, int32_t *out_done), (event, out_done))    \
    /* workspace retirement: the resource is unused, the callback frees */        \
    F(tf_workspace_retire, (tf_runtime *rt, uintptr_t callback),                  \
      (rt, NULL, tfgo_release_trampoline, (void *)callback))                      \
    F(tf_workspace_poll, (tf_runtime *rt), (rt))                                  \
    F(tf_workspace_stats, (const tf_runtime *rt, tf_retirement_stats *out), (rt, out)) \
    /* modules and kernels */                                                     \
    F(tf_module_load, (tf_runtime *rt, const void *image, size_t size, tf_module **out), \
      (rt, image, size, out))                                                     \
    F(tf_module_retain, (tf_module *module), (module))                            \
    F(tf_module_release, (tf_module *module), (module))                           \
    F(tf_module_function, (tf_module *module, const char *name, void **out_function), \
      (module, name, out_function))                                               \
    F(tf_function_set_attribute,                                                  \
      (tf_module *module, void *function, int32_t attribute, int32_t value),      \
      (module, function, attribute, value))                                       \
    F(tf_kernel_launch,                                                           \
      (tf_runtime *rt, void *function, const tf_launch_config *config, void **args), \
      (rt, function, config, args))                                               \
    /* NVRTC */                                                                   \
    F(tf_program_compile,                                                         \
      (tf_runtime *rt, const char *source, const tf_compile_options *options,     \
       tf_program **out),                                                         \
      (rt, source, options, out))                                                 \
    F(tf_program_image, (const tf_program *program, const void **out_image, size_t *out_size), \
      (program, out_image, out_size))                                             \
    F(tf_program_log, (const tf_program *program, const char **out_log),          \
      (program, out_log))                                                         \
    V(tf_program_release, (tf_program *program), (program))                       \
    OF("1.1", tf_program_retain, (tf_program *program), (program))                \
    OF("1.1", tf_program_release_checked, (tf_program *program), (program))       \
    /* device memory and transfers */                                             \
    F(tf_alloc, (tf_runtime *rt, size_t bytes, uint64_t *out_ptr), (rt, bytes, out_ptr)) \
    F(tf_free, (tf_runtime *rt, uint64_t ptr), (rt, ptr))                         \
    F(tf_upload, (tf_runtime *rt, const void *src, uint64_t dst, size_t len),     \
      (rt, src, dst, len))                                                        \
    F(tf_copy, (tf_runtime *rt, uint64_t src, uint64_t dst, size_t len),          \
      (rt, src, dst, len))                                                        \
    F(tf_peer_copy_available, (tf_runtime *src_rt, tf_runtime *dst_rt, int32_t *out), \
      (src_rt, dst_rt, out))                                                      \
    F(tf_peer_copy,                                                               \
      (tf_runtime *src_rt, uint64_t src, tf_runtime *dst_rt, uint64_t dst, size_t len), \
      (src_rt, src, dst_rt, dst, len))                                            \
    F(tf_download_scalar, (tf_runtime *rt, uint64_t src, void *out, size_t len),  \
      (rt, src, out, len))                                                        \
    F(tf_download, (tf_runtime *rt, uint64_t src, void *dst, size_t len),         \
      (rt, src, dst, len))                                                        \
    /* 1.1: page-locked host memory and asynchronous copies */                    \
    OF("1.1", tf_host_alloc, (tf_runtime *rt, size_t bytes, void **out_ptr),      \
       (rt, bytes, out_ptr))                                                      \
    OF("1.1", tf_host_free, (tf_runtime *rt, void *ptr), (rt, ptr))               \
    OF("1.1", tf_host_record_use, (tf_runtime *rt, void *ptr), (rt, ptr))         \
    OF("1.1", tf_host_register, (tf_runtime *rt, void *ptr, size_t bytes),        \
       (rt, ptr, bytes))                                                          \
    OF("1.1", tf_host_unregister, (tf_runtime *rt, void *ptr), (rt, ptr))         \
    OV("1.1", tf_host_pool_stats_init, (tf_host_pool_stats *s, size_t size),      \
       (s, size))                                                                 \
    OF("1.1", tf_host_stats, (const tf_runtime *rt, tf_host_pool_stats *out),     \
       (rt, out))                                                                 \
    OF("1.1", tf_host_trim, (tf_runtime *rt), (rt))                               \
    OF("1.1", tf_download_async, (tf_runtime *rt, uint64_t src, void *dst, size_t len), \
       (rt, src, dst, len))                                                       \
    OF("1.1", tf_upload_async, (tf_runtime *rt, const void *src, uint64_t dst, size_t len), \
       (rt, src, dst, len))                                                       \
    /* 1.2: the device memory pool */                                             \
    OV("1.2", tf_memory_pool_stats_init, (tf_memory_pool_stats *s, size_t size),  \
       (s, size))                                                                 \
    OF("1.2", tf_memory_stats, (const tf_runtime *rt, tf_memory_pool_stats *out), \
       (rt, out))                                                                 \
    OF("1.2", tf_memory_reset_peak, (tf_runtime *rt), (rt))                       \
    OF("1.2", tf_memory_trim, (tf_runtime *rt, uint64_t keep_bytes), (rt, keep_bytes)) \
    OF("1.2", tf_memory_record_use, (tf_runtime *rt, uint64_t ptr), (rt, ptr))       \
    /* 1.2: graph capture */                                                      \
    OF("1.2", tf_graph_capture_begin, (tf_runtime *rt), (rt))                     \
    OF("1.2", tf_graph_capture_end, (tf_runtime *rt, tf_graph **out), (rt, out))  \
    OF("1.2", tf_graph_capture_update,                                            \
       (tf_runtime *rt, tf_graph *graph, int32_t *out_updated_in_place),          \
       (rt, graph, out_updated_in_place))                                         \
    OF("1.2", tf_graph_capture_abort, (tf_runtime *rt), (rt))                     \
    OF("1.2", tf_graph_launch, (tf_runtime *rt, tf_graph *graph), (rt, graph))    \
    OF("1.2", tf_graph_retain, (tf_graph *graph), (graph))                        \
    OF("1.2", tf_graph_release, (tf_graph *graph), (graph))

#define TFGO_DECLARE_F(fn, params, args) tf_error_info *go_##fn params;
#define TFGO_DECLARE_R(type, fn, params, args) type go_##fn params;
#define TFGO_DECLARE_V(fn, params, args) void go_##fn params;
#define TFGO_DECLARE_O(since, fn, params, args) tf_error_info *go_##fn params;
TFGO_FUNCTIONS(TFGO_DECLARE_F, TFGO_DECLARE_R, TFGO_DECLARE_V, TFGO_DECLARE_O, TFGO_DECLARE_O)
#undef TFGO_DECLARE_F
#undef TFGO_DECLARE_R
#undef TFGO_DECLARE_V
#undef TFGO_DECLARE_O

/* Makes the functions callable, once per process (Go serializes the calls):
 * 0, or -1 with the reason in why[0 .. cap-1].  The default build opens
 * $TENFERRO_GPU_LIBRARY (an absolute path; ignored in set-ID programs) or
 * else libtenferro_gpu.so.1 through the loader's search path, and resolves
 * every listed function; a library that lacks a required (1.0) one, or of
 * another major version, is refused; optional ones it lacks stay NULL.
 * With TFGO_LINKED it only checks the version. */
int tfgo_load(char *why, size_t cap);

/* The file the functions come from ("" if the loader cannot say); only
 * after tfgo_load() succeeded. */
const char *tfgo_library_path(void);

/* Frees what a wrapper returned (NULL is ignored). */
void tfgo_error_free(tf_error_info *info);

/* 1 while the calling thread runs the Go log callback (see log_cgo.go). */
int tfgo_in_log_callback(void);

/* A synchronous copy between the device and host memory: `error` is what
 * its go_ wrapper returns.  After a failure that may leave the copy queued
 * (any status but TF_ERROR_INVALID_ARGUMENT), `recorded` is the status of
 * tf_host_record_use of the host memory on the failed call's slot (TF_OK:
 * the runtime's pool now keeps a block from reuse, and an unregister
 * waits, until that stream has passed the copy), `slot` that slot (-1 if
 * unknown).  Returned by value, so that Go passes no pointer of its own. */
typedef struct tfgo_copy_result {
    tf_error_info *error;
    int32_t recorded;
    int32_t slot;
} tfgo_copy_result;

/* tf_download and tf_upload, with what the failure left noted in the same
 * cgo call, so on the failing thread, whose slot the copy used. */
tfgo_copy_result tfgo_download(tf_runtime *rt, uint64_t src, void *dst, size_t len);
tfgo_copy_result tfgo_upload(tf_runtime *rt, const void *src, uint64_t dst, size_t len);

/* cublasSgemm_v2 (is_double 0: alpha, beta are floats) or cublasDgemm_v2
 * (1: doubles) through the address tf_cublas_symbol() gave, so Go needs no
 * cuBLAS header or library of its own.  alpha and beta are host pointers,
 * or NULL to use alpha_dev / beta_dev, device addresses (for
 * TF_CUBLAS_POINTER_MODE_DEVICE).  Returns the cublasStatus_t. */
int32_t tfgo_gemm(int is_double, void *fn, void *handle, int32_t transa, int32_t transb,
                  int32_t m, int32_t n, int32_t k, const void *alpha, uint64_t alpha_dev,
                  uint64_t a, int32_t lda, uint64_t b, int32_t ldb, const void *beta,
                  uint64_t beta_dev, uint64_t c, int32_t ldc);

#endif
