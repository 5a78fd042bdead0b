/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Helpers of the transfer suites: device buffers, byte patterns, page-locked
 * host memory and device work queued through whichever driver is loaded
 * (the double or the real one), so the same tests run on both. */
#ifndef TF_TRANSFER_SUPPORT_H
#define TF_TRANSFER_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tenferro_gpu.h"

/* A runtime on device 0 with these options, failing the test on error. */
tf_runtime *runtime_with(uint32_t slots, uint32_t download_threads, uint32_t download_chunk_bytes);

/* tf_alloc / tf_free that fail the test on error. */
uint64_t lib_alloc(tf_runtime *rt, size_t bytes);
void lib_free(tf_runtime *rt, uint64_t ptr);

/* Deterministic bytes that differ between seeds and between nearby
 * positions, so a misplaced or missing chunk shows. */
void fill_pattern(void *p, size_t n, uint32_t seed);
/* Index of the first byte that differs from the pattern, or n. */
size_t pattern_mismatch(const void *p, size_t n, uint32_t seed);
#define assert_pattern(p, n, seed) assert_int_equal(pattern_mismatch((p), (n), (seed)), (n))

/* Page-locked host memory made with cuMemHostAlloc (flags 0) while the
 * runtime's primary context is current; freed with cuMemFreeHost. */
void *pinned_alloc(tf_runtime *rt, size_t bytes);
void pinned_free(tf_runtime *rt, void *p);

/* Queues cuMemsetD8Async(dst, value, n) on the calling thread's slot stream
 * of rt (tf_runtime_stream), without waiting for it. */
void queue_memset(tf_runtime *rt, uint64_t dst, unsigned char value, size_t n);

/* The overlap check of tf_copy (peer == 0, src_rt only) or tf_peer_copy
 * (peer != 0, both runtimes on one device) at its boundary: 8-byte copies
 * between a + 0 and a + diff, both ways, for diff = 7 (overlap: refused
 * with TF_ERROR_INVALID_ARGUMENT and "overlap"), 8 (adjacent) and 9
 * (apart), which must copy exactly the 8 bytes.  a is device memory of
 * at least 32 bytes; its content is overwritten. */
void check_overlap_boundary(tf_runtime *src_rt, tf_runtime *dst_rt, uint64_t a, int peer);

/* Runs call(arg) on a new thread that has a thread cancellation request
 * pending from before the call, with the log going to a callback that is a
 * cancellation point (as one that writes to a file is); the default log is
 * back afterwards.  Returns 1 if the call returned (its status in *status),
 * 0 if the thread was cancelled inside it. */
int call_with_cancel_pending(tf_status (*call)(void *), void *arg, tf_status *status);

/* Threads of this process named "tf-download" (the runtimes' copy threads). */
int count_copy_threads(void);
/* count_copy_threads() once it equals `expected`, or after 1 s: a joined
 * thread can stay listed briefly while the kernel finishes its exit. */
int copy_threads_settle(int expected);

#endif
