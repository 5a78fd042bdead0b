/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Run-time link to the CUDA driver double's control interface.
 *
 * Tests never link the double: the library under test loads whatever
 * libcuda.so.1 the loader finds (the double when its folder is first on
 * LD_LIBRARY_PATH, the real driver on a GPU machine).  tfd() finds the
 * tfd_* functions in that same libcuda.so.1 with dlsym and returns them as a
 * table, or NULL when the loaded driver is not the double (or none can be
 * loaded); tests that need the double then skip.
 *
 *     const struct tfd_api *d = tfd();
 *     if (d == NULL) { skip(); }
 *     d->tfd_fail("cuMemAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
 *
 * Each member is a pointer to the tfd_* function of the same name
 * (tests/cuda_double/tfd_control.h documents them).
 */
#ifndef TFD_DOUBLE_LINK_H
#define TFD_DOUBLE_LINK_H

#include "../cuda_double/tfd_control.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every function of tfd_control.h, without its tfd_ prefix (the members
 * keep it, since CMocka defines a macro named fail()). */
/* One line per group of controls; clang-format would pour them into one. */
/* clang-format off */
#define TFD_API_FUNCTIONS(X) \
    X(reset) \
    X(set_devices) X(set_attribute) X(set_peer_access) X(set_total_mem) \
    X(set_initialized) X(set_driver_version) \
    X(fail) X(fail_after) X(clear_faults) X(set_entry_delay_us) X(hide) \
    X(poison_context) \
    X(context_poison) \
    X(calls) X(requested_version) X(requested_flags) \
    X(log_count) X(log_name) X(log_format) X(log_clear) \
    X(live) X(reclaimed) X(primary_refcount) X(primary_context) \
    X(current_context) X(stream_flags) X(stream_context) X(host_alloc_flags) \
    X(host_allocs) \
    X(peer_enabled) X(func_attribute) \
    X(create_context) X(destroy_context) X(set_current) \
    X(device_alloc) X(device_free) X(device_write) X(device_read) \
    X(set_async_pending) X(complete_all) \
    X(set_execution) X(execution) X(set_background_delay_us) X(set_query_progress) \
    X(step) X(drain_all) X(pending) X(pending_total) X(enqueue) X(reached) X(advance) \
    X(capture_nodes) \
    X(cublas_get) X(cublas_stream) X(cublas_workspace) \
    X(enter) X(enter_ex) X(translate) X(lock) X(unlock) X(count_live) \
    X(context_status) X(stream_status) X(cublas_register) \
    X(cublas_unregister) X(cublas_lookup) \
    X(mem_pool_info) X(default_mem_pool) X(mem_pools)
/* clang-format on */

/* tfd_<name>_fn: the function type of tfd_<name> (a distinct name, so C++
 * accepts members named like the functions). */
#define TFD_API_TYPE(name) typedef __typeof__(tfd_##name) tfd_##name##_fn;
TFD_API_FUNCTIONS(TFD_API_TYPE)
#undef TFD_API_TYPE

struct tfd_api {
#define TFD_API_MEMBER(name) tfd_##name##_fn *tfd_##name;
    TFD_API_FUNCTIONS(TFD_API_MEMBER)
#undef TFD_API_MEMBER
};

/* The control interface of the loaded driver double, or NULL.  Resolved
 * once per process; thread-safe. */
const struct tfd_api *tfd(void);

/* Path of the libcuda.so.1 tfd() resolved (NULL when tfd() is NULL), so a
 * test can find the companion doubles beside it. */
const char *double_link_path(void);

#ifdef __cplusplus
}
#endif

#endif
