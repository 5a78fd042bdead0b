/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Control interface of the CUDA driver double (tests only).
 *
 * The double is a shared library named libcuda.so.1 that implements, in host
 * memory, every driver entry point tenferro-gpu resolves (src/driver/driver_entries.inc).
 * Tests put its folder first on LD_LIBRARY_PATH; the library under test then
 * loads it exactly as it loads the real driver.  Companion doubles
 * libcublas.so.13 / libcublas.so.12, libnvrtc.so.13 and libnccl.so.2 share
 * its state.
 *
 * Tests never link these functions directly: tests/support/double_link.h
 * resolves them with dlsym from whatever libcuda.so.1 the process loaded, so
 * the same test binaries run against the real driver, where these symbols do
 * not exist and tests that need them skip.
 *
 * Every function here is thread-safe (one mutex inside the double).
 * docs/testing.md describes how the suites use the double.
 */
#ifndef TFD_CONTROL_H
#define TFD_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kinds of live objects the double counts (tfd_live). */
enum tfd_kind {
    TFD_STREAMS = 0,
    TFD_EVENTS = 1,
    TFD_DEVICE_ALLOCS = 2, /* cuMemAlloc, cuMemAllocAsync, cuMemAllocFromPoolAsync */
    TFD_HOST_ALLOCS = 3,   /* cuMemHostAlloc */
    TFD_MODULES = 4,
    TFD_CUBLAS_HANDLES = 5,
    TFD_NVRTC_PROGRAMS = 6,
    TFD_CONTEXTS = 7,    /* non-primary contexts (tfd_create_context) */
    TFD_GRAPHS = 8,      /* CUgraph: cuStreamEndCapture */
    TFD_GRAPH_EXECS = 9, /* CUgraphExec: cuGraphInstantiateWithFlags */
    TFD_MEM_POOLS = 10,  /* cuMemPoolCreate pools not yet gone (tfd_mem_pool_info) */
    TFD_KIND_COUNT = 11
};

/* Forget every fault rule, entry delay, hidden-entry mark, call counter,
 * the call log and device configuration changes (back to one device).
 * Every stream first
 * runs the work still queued on it (tfd_drain_all); then the execution
 * settings go back to their defaults: TFD_EXEC_DEFERRED, query progress 0,
 * background delay 1000 us.  Objects that still exist (streams,
 * allocations, contexts, retained primary contexts) are kept, so a test can
 * assert what a previous step leaked; context poison and the calling
 * thread's current context are kept. */
void tfd_reset(void);

/* ---- devices ---------------------------------------------------------- */

/* Number of devices (default 1, at most 8).  With 0, cuInit returns
 * CUDA_ERROR_NO_DEVICE and cuDeviceGetCount reports 0. */
void tfd_set_devices(int count);
/* Override cuDeviceGetAttribute(attr) for a device (-1: every device).
 * CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 answers 1 by default, as on
 * an H200; set to 0, cuStreamWriteValue32 answers CUDA_ERROR_NOT_SUPPORTED
 * on that device, as on a platform with stream memory operations off. */
void tfd_set_attribute(int device, int attribute, int value);
/* cuDeviceCanAccessPeer(dev, peer) answer (default 0). */
void tfd_set_peer_access(int device, int peer, int can_access);
/* Total memory of a device (-1: every device; default 80 GiB).  Allocations
 * beyond it, counted over all live allocations of the device, fail with
 * CUDA_ERROR_OUT_OF_MEMORY.  Reset by tfd_reset. */
void tfd_set_total_mem(int device, size_t bytes);
/* The CUDA version cuDriverGetVersion reports (default 13000).  Kept by
 * tfd_reset; the library reads it once, when it loads the driver. */
void tfd_set_driver_version(int version);
/* Whether cuInit has succeeded (on: as if it had).  tfd_reset keeps it, as a
 * real process cannot un-initialize; turn it off to test calls made before
 * cuInit. */
void tfd_set_initialized(int on);

/* ---- fault injection -------------------------------------------------- */

/* Calls number nth .. nth+times-1 (1-based, counted from this call) of the
 * entry point `entry` return `code` and have no effect.  times == 0 means
 * every call from the nth on.  `entry` is a driver name ("cuStreamCreate"),
 * a cuBLAS name ("cublasCreate_v2"), an NVRTC name ("nvrtcCompileProgram"),
 * or "*" for every driver entry point.  Rules accumulate until tfd_reset or
 * tfd_clear_faults. */
void tfd_fail(const char *entry, unsigned long nth, int code, unsigned long times);
/* Like tfd_fail, but the matching calls first take their normal effect and
 * then return `code` (a partial failure: e.g. cuCtxSetCurrent that changed
 * the current context yet reports an error). */
void tfd_fail_after(const char *entry, unsigned long nth, int code, unsigned long times);
void tfd_clear_faults(void);

/* Every later call of the driver entry point `entry` first sleeps
 * `microseconds` (0: no more), without holding the double's lock, then runs
 * as usual: other threads go on calling the double meanwhile, so a test can
 * hold one thread inside a call (cuStreamCreate) while others race past it.
 * Delays are not counted or logged; tfd_reset removes them. */
void tfd_set_entry_delay_us(const char *entry, unsigned long microseconds);

/* Make cuGetProcAddress report `entry` as not found.  Takes effect for
 * resolutions made after the call (the library resolves once per process). */
void tfd_hide(const char *entry);

/* Every later call made while `context` is current, and every call on a
 * stream of `context`, returns `code` (a sticky device fault).  Calls that do
 * not need a context (cuInit, device queries, cuGetErrorName/String,
 * cuGetProcAddress, the cuDevicePrimaryCtx* calls, cuCtxGetCurrent and
 * cuCtxSetCurrent) are not affected.  The poison lasts until the context is
 * destroyed (a primary context: its retain count drops to 0) or code 0 is
 * given here. */
void tfd_poison_context(void *context, int code);
/* The sticky code of a context (0: healthy or unknown). */
int tfd_context_poison(void *context);

/* ---- observation ------------------------------------------------------ */

/* Calls of `entry` since the last reset, failed ones included.  Both
 * exported generations of cuGetProcAddress are logged and counted as
 * "cuGetProcAddress"; "cuGetProcAddress_v2" is accepted as a synonym here and
 * in tfd_fail / tfd_fail_after. */
unsigned long tfd_calls(const char *entry);
/* The cudaVersion the library passed to cuGetProcAddress for `entry`, or -1. */
int tfd_requested_version(const char *entry);
/* The flags the library passed to cuGetProcAddress for `entry`, or -1. */
long long tfd_requested_flags(const char *entry);
/* Call log: every entry point call in order, since reset or tfd_log_clear.
 * It keeps at most 4194304 entries; later calls are still counted
 * (tfd_calls) but not logged. */
size_t tfd_log_count(void);
const char *tfd_log_name(size_t index); /* NULL past the end */
/* Comma-joined names of log entries [from, end) into buf (always terminated);
 * returns the length the full string needs. */
size_t tfd_log_format(char *buf, size_t cap, size_t from);
void tfd_log_clear(void);

long tfd_live(int kind);
/* Objects of `kind` the double destroyed itself because their context was
 * destroyed (a primary context released to 0, tfd_destroy_context) while
 * they were still alive, since the last reset.  Their handles are invalid
 * from then on.  A library that destroys its objects before releasing its
 * context keeps this at 0. */
long tfd_reclaimed(int kind);
/* Retain count of a device's primary context (0: not retained, inactive). */
int tfd_primary_refcount(int device);
void *tfd_primary_context(int device);         /* stable handle per device */
void *tfd_current_context(void);               /* calling thread's */
unsigned tfd_stream_flags(void *stream);       /* flags given to cuStreamCreate; ~0u if unknown */
void *tfd_stream_context(void *stream);        /* NULL if unknown */
unsigned tfd_host_alloc_flags(void *host_ptr); /* flags given to cuMemHostAlloc; ~0u if unknown */
/* The live cuMemHostAlloc allocations in address order: up to `cap` of
 * their addresses and flags (either array may be NULL); returns how many
 * are live. */
size_t tfd_host_allocs(void **ptrs, unsigned *flags, size_t cap);
/* Whether `context` enabled peer access to `peer` (cuCtxEnablePeerAccess). */
int tfd_peer_enabled(void *context, void *peer);
/* Value set with cuFuncSetAttribute on a function, or -1 if never set. */
int tfd_func_attribute(void *function, int attribute);

/* ---- contexts and memory for tests ------------------------------------ */

/* A non-primary context on `device` (like cuCtxCreate, but does not make it
 * current).  Destroy with tfd_destroy_context. */
void *tfd_create_context(int device);
void tfd_destroy_context(void *context);
/* Make `context` (or NULL) current on the calling thread without touching
 * the call log or counters. */
void tfd_set_current(void *context);

/* Device memory made directly in the double (no context needed); the
 * address is never a valid host address.  0 on failure.  Not counted in
 * TFD_DEVICE_ALLOCS and never reclaimed with a context. */
uint64_t tfd_device_alloc(int device, size_t bytes);
void tfd_device_free(uint64_t dptr);
/* Direct access to device memory; 0 on success, -1 if the range is not
 * inside one live allocation. */
int tfd_device_write(uint64_t dptr, const void *src, size_t bytes);
int tfd_device_read(uint64_t dptr, void *dst, size_t bytes);

/* ---- execution of stream work ----------------------------------------- */

/* Stream work -- async copies, memsets, kernel launches, cuBLAS GEMMs, host
 * functions (cuLaunchHostFunc), event records, stream waits, cuMemFreeAsync
 * -- is checked when it is called (bad arguments fail at once, as before)
 * and appended to its stream's queue.  Its effect on device memory (or on
 * page-locked host memory) happens when the stream RUNS it.  A stream runs
 * its queue strictly in order; a stream wait (cuStreamWaitEvent) first runs
 * the event's stream up to the record the wait saw when it was queued.  The
 * legacy default stream and the blocking streams of a context wait for
 * each other as in CUDA; non-blocking streams do not.
 *
 * What makes a stream run, besides the execution mode:
 *  - cuStreamSynchronize (the legacy stream: also the context's blocking
 *    streams), cuEventSynchronize (the recording stream up to the record),
 *    cuCtxSynchronize (every stream of the context): the calling thread
 *    runs the work itself, so a sync never waits for anything else;
 *  - cuMemcpyDtoHAsync into pageable memory: its stream up to and including
 *    the copy (the real driver returns once such a copy is done);
 *  - the synchronous copies (cuMemcpyHtoD/DtoH/DtoD): the legacy stream up
 *    to the copy;
 *  - cuMemFree: every stream of the allocation's device; cuMemFreeHost:
 *    every stream (both are synchronous in CUDA);
 *  - cuStreamDestroy: that stream; the end of a context (primary release to
 *    0, tfd_destroy_context): its streams.  CUDA finishes such work after
 *    the call; the double runs it in the call, so the outcome is fixed;
 *  - cuEventQuery / cuStreamQuery, with tfd_set_query_progress(n);
 *  - tfd_step, tfd_drain_all, tfd_reset.
 *
 * Host memory: an HtoD copy from pageable memory (anything but a
 * cuMemHostAlloc block) stages the bytes at the call, so the caller may
 * reuse the source at once; a DtoH copy to pageable memory returns when
 * done (above).  Page-locked memory is read and written when the copy runs,
 * so reusing it too early shows.  As with unified addressing, every
 * cuMemHostAlloc block is also device memory at its host address
 * (cuMemHostGetDevicePointer returns it): copies, memsets and kernels may
 * write it.  Ops write page-locked memory with atomic release stores, so
 * host code spinning on it with atomic loads (while the background thread
 * runs the ops) has no data race.
 *
 * Faults: an op of a context with a sticky fault (tfd_poison_context, or a
 * fault raised by an earlier op) is dropped, not run; the stream still moves
 * past it.  A kernel that touches bad memory (tfd_illegal_address, or a
 * range outside the allocations its context may reach), and any op whose
 * device memory was freed before it ran (for a pool's memory: given back to
 * the device, not merely freed into the pool), faults its context with
 * CUDA_ERROR_ILLEGAL_ADDRESS when it RUNS; the call that made it run reports
 * the fault when it is a synchronizing call of that context.
 *
 * Host functions run on whichever thread makes their stream progress, with
 * the double's mutex held: like CUDA, the double refuses driver calls from a
 * host function (CUDA_ERROR_NOT_PERMITTED, not logged).  It may use the
 * controls that only look (tfd_device_read, tfd_live, ...), but not those
 * that make streams progress (tfd_step, tfd_drain_all, tfd_reset,
 * tfd_set_execution), and must not wait for another thread that calls the
 * double.
 *
 * Device memory from cuMemAllocAsync exists from the call; a
 * cuMemFreeAsync releases it when its stream runs the free (work that runs
 * after that and uses it faults its context; a second free of the same
 * memory is CUDA_ERROR_INVALID_VALUE at the call).  tfd_device_read / tfd_device_write bypass the
 * queues: they see device memory as the work run so far left it. */
enum tfd_execution {
    TFD_EXEC_SYNC = 0,      /* every op runs as soon as it is queued */
    TFD_EXEC_DEFERRED = 1,  /* ops run only when their stream is made to
                             * progress (above); the default */
    TFD_EXEC_BACKGROUND = 2 /* deferred, and a thread of the double also
                             * runs each op once it is the background delay
                             * old (so host code that spins on page-locked
                             * memory sees it change without a sync call) */
};
/* Switch modes; unknown values are ignored.  Work already queued stays
 * queued when switching to TFD_EXEC_SYNC: it runs, in order, before the
 * next op queued on its stream or at the next progress call. */
void tfd_set_execution(int mode);
int tfd_execution(void);
/* How old an op must be before the background thread runs it (default
 * 1000 us; tfd_reset restores it). */
void tfd_set_background_delay_us(unsigned long microseconds);
/* Each cuEventQuery first runs up to `ops` ops of the event's stream
 * (stopping at the record); each cuStreamQuery up to `ops` ops of its
 * stream.  A wait among them first runs what it waits for on other streams,
 * which is not counted.  Default 0: a query never makes progress. */
void tfd_set_query_progress(unsigned long ops);
/* Run up to `ops` ops of `stream` (NULL: the legacy stream of the calling
 * thread's current context), in order, as above; returns how many ran. */
unsigned long tfd_step(void *stream, unsigned long ops);
/* Run every queued op of every stream. */
void tfd_drain_all(void);
/* Ops queued on `stream` (NULL as for tfd_step) and not run yet; on all
 * streams. */
unsigned long tfd_pending(void *stream);
unsigned long tfd_pending_total(void);
/* Stream capture (cuStreamBeginCapture) is modelled as the real driver has
 * it: work queued on a capturing stream becomes a node of its graph instead
 * of running; cuGraphLaunch queues the nodes of an instantiated graph like
 * any other work; calls that would wait for a capturing stream fail and
 * invalidate the capture (tests/cuda_double/graph.h lists the rules).
 * Nodes captured so far on `stream` (0 when it does not capture; an
 * invalidated capture has none). */
unsigned long tfd_capture_nodes(void *stream);
/* Older spellings: tfd_set_async_pending(1) is
 * tfd_set_execution(TFD_EXEC_DEFERRED), (0) is
 * tfd_set_execution(TFD_EXEC_SYNC); tfd_complete_all is tfd_drain_all. */
void tfd_set_async_pending(int on);
void tfd_complete_all(void);

/* ---- memory pools ------------------------------------------------------
 *
 * Every device has a default pool (behind cuMemAllocAsync and
 * cuDeviceGetDefaultMemPool, release threshold 0) and may have pools made
 * with cuMemPoolCreate.  A pool reserves a block per allocation (512-byte
 * multiples) and keeps it after the free: the next allocation that fits
 * takes it, at the same address, once the free ran (or at once on the
 * stream that freed it).  Freed blocks go back to the device at
 * cuMemPoolTrimTo and, down to the release threshold, at every
 * cuStreamSynchronize / cuEventSynchronize / cuCtxSynchronize.  maxSize and
 * the device's total memory (tfd_set_total_mem, counted over every pool's
 * reservations and every cuMemAlloc) bound the reservations:
 * CUDA_ERROR_OUT_OF_MEMORY beyond.  cuMemPoolDestroy returns at once; the
 * pool goes (tfd_live(TFD_MEM_POOLS) drops) when its last allocation is
 * freed or its context destroyed.  cuMemGetInfo answers total and
 * total minus what is reserved or allocated. */
struct tfd_mem_pool_info {
    int device;
    int is_default;   /* a device's default pool */
    int destroyed;    /* cuMemPoolDestroy was called; allocations outstanding */
    int handle_types; /* CUmemPoolProps::handleTypes */
    uint64_t release_threshold;
    uint64_t max_size; /* CUmemPoolProps::maxSize, 0: none */
    uint64_t reserved, reserved_high, used, used_high;
    unsigned long attribute_sets; /* cuMemPoolSetAttribute calls that succeeded */
    unsigned long allocations;    /* allocations it served */
    unsigned long trims;          /* cuMemPoolTrimTo calls */
    size_t blocks;                /* blocks reserved, free or not */
};
/* 0 and *out filled, or -1 for an unknown handle (a pool that went).  The
 * call counters restart at 0 with tfd_reset. */
int tfd_mem_pool_info(void *pool, struct tfd_mem_pool_info *out);
/* The default pool of `device` (NULL for a bad ordinal). */
void *tfd_default_mem_pool(int device);
/* The cuMemPoolCreate pools not yet gone: up to `cap` handles (may be
 * NULL); returns how many there are. */
size_t tfd_mem_pools(void **pools, size_t cap);

/* ---- cuBLAS handles ----------------------------------------------------- */

/* What the double knows about a cuBLAS handle. */
struct tfd_cublas_info {
    void *context;    /* context current at cublasCreate */
    void *stream;     /* cublasSetStream (NULL: default stream) */
    int pointer_mode; /* cublasPointerMode_t */
    void *workspace;  /* cublasSetWorkspace */
    size_t workspace_size;
    void *last_stream;   /* stream the latest GEMM was queued on */
    unsigned long gemms; /* GEMMs queued with this handle (they run
                          * when the stream runs them) */
};
/* Copy the record of `handle` into *out; 0 on success, -1 if unknown. */
int tfd_cublas_get(void *handle, struct tfd_cublas_info *out);
/* Stream set on `handle` (NULL if none or unknown). */
void *tfd_cublas_stream(void *handle);
/* Workspace set on `handle`; 0 on success, -1 if unknown. */
int tfd_cublas_workspace(void *handle, void **ptr, size_t *size);

/* ---- used by the companion doubles ----------------------------------- */

/* Record a call of `entry` in the log and counters; return the injected
 * code for it (0 when none).  A tfd_fail_after rule is reported here as a
 * plain failure (use tfd_enter_ex to honour it). */
int tfd_enter(const char *entry);
/* Like tfd_enter, and *after_code (if not NULL) receives the code of a
 * tfd_fail_after rule: the caller does its work, then returns that code when
 * the work succeeded. */
int tfd_enter_ex(const char *entry, int *after_code);
/* Host view of [dptr, dptr+bytes) if inside one live allocation, else NULL. */
void *tfd_translate(uint64_t dptr, size_t bytes);
/* Where an op sits: its stream and its position there. */
struct tfd_ticket {
    uint64_t stream_key;
    uint64_t seq;
};
/* Queue work on `stream` (NULL: the legacy default stream) of the current
 * context, checked as tfd_stream_status does.  Returns 0 when queued: the
 * double then owns `arg` and calls run(arg) when the stream runs the op
 * (with its mutex held; a nonzero return is a CUresult that faults the
 * context, e.g. CUDA_ERROR_ILLEGAL_ADDRESS), then drop(arg) (if not NULL),
 * once; an op dropped because its context faulted only gets drop(arg).
 * *ticket (if not NULL) then says where the op sits.  Otherwise returns the
 * CUresult, queues nothing and leaves `arg` to the caller.  `what` (a
 * static string) names the op. */
int tfd_enqueue(void *stream, const char *what, int (*run)(void *arg), void *arg,
                void (*drop)(void *arg), struct tfd_ticket *ticket);
/* Whether the op of `ticket` has run (or was dropped). */
int tfd_reached(const struct tfd_ticket *ticket);
/* Run the ticket's stream until its op has run, as a synchronizing call
 * would; for an op that must meet ops of other streams (a collective),
 * from inside its run().  0, or -1 when that needs a stream that is running
 * an op further up this thread's stack (a cycle: on a device it would never
 * end). */
int tfd_advance(const struct tfd_ticket *ticket);
/* The double's mutex (recursive).  A companion holds it around work that
 * reads the double's state or device memory, so that it runs atomically
 * with respect to driver calls on other threads. */
void tfd_lock(void);
void tfd_unlock(void);
/* Adjust a tfd_live counter (companion-owned kinds such as NVRTC programs). */
void tfd_count_live(int kind, long delta);
/* The CUresult a call that needs a context would get on this thread now
 * (0: a usable current context; else NOT_INITIALIZED, INVALID_CONTEXT or
 * the context's sticky code). */
int tfd_context_status(void);
/* The CUresult of using `stream` (NULL: default stream) from this thread
 * now: tfd_context_status, then INVALID_HANDLE / INVALID_CONTEXT. */
int tfd_stream_status(void *stream);
/* Register a cuBLAS handle bound to the current context (NULL if none is
 * usable); tfd_cublas_unregister forgets it (0, or -1 if unknown).  Both
 * keep TFD_CUBLAS_HANDLES. */
void *tfd_cublas_register(void);
int tfd_cublas_unregister(void *handle);
/* The double's own record of a handle, NULL if unknown; only valid while
 * tfd_lock is held. */
struct tfd_cublas_info *tfd_cublas_lookup(void *handle);

#ifdef __cplusplus
}
#endif

#endif
