/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Device memory for tests, without the library's own allocation calls.
 *
 * cuMemAlloc / cuMemFree come from the libcuda.so.1 the library loaded
 * (through cuGetProcAddress, so the same helper works on the double and on
 * the real driver) and run inside tf_with_context, with the runtime's
 * primary context current.  Copies are queued on the caller's slot stream
 * with tf_stream_enqueue and waited for with tf_runtime_sync, so they are
 * ordered with the work the test queued there.  Every helper fails the
 * calling test on error. */
#ifndef TF_TEST_RAW_MEMORY_H
#define TF_TEST_RAW_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "tenferro_gpu.h"

uint64_t dev_alloc(tf_runtime *rt, size_t bytes);
void dev_free(tf_runtime *rt, uint64_t dptr);
/* Copies and waits for the caller's slot stream. */
void dev_upload(tf_runtime *rt, uint64_t dst, const void *src, size_t bytes);
void dev_download(tf_runtime *rt, void *dst, uint64_t src, size_t bytes);
/* The same without the final wait (the caller orders and waits). */
void dev_upload_async(tf_runtime *rt, uint64_t dst, const void *src, size_t bytes);
void dev_download_async(tf_runtime *rt, void *dst, uint64_t src, size_t bytes);
/* A copy on the legacy default stream, waited for: ordered with no slot
 * stream.  The runtime's context must be current (e.g. inside a release). */
void dev_read_unordered(void *dst, uint64_t src, size_t bytes);

#endif
