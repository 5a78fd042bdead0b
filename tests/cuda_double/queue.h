/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Stream queues of the CUDA driver double: the device's side of the work.
//
// Every stream-ordered call (copies, memsets, kernel launches, cuBLAS GEMMs,
// host functions, event records, stream waits, stream-ordered frees) is
// validated when it is made, then appended to its stream's queue as an Op.
// What the op does to device (or page-locked host) memory happens only when
// the stream runs it.  A stream runs its ops strictly in order, and only
// when something makes it progress (mutex held throughout):
//
//  * a synchronizing call (cuStreamSynchronize, cuEventSynchronize up to the
//    event's record, cuCtxSynchronize, a pageable cuMemcpyDtoHAsync up to
//    the copy, cuMemFree / cuMemFreeHost: every stream of the device, a
//    destroyed stream or context: its own streams);
//  * a query when the test allows queries to progress (query_progress);
//  * an explicit step from the test (tfd_step, tfd_drain_all);
//  * the execution mode: sync runs every op as soon as it is queued,
//    background has a thread of the double run ops once they are `delay`
//    old.
//
// Ordering between streams: an op that waits (cuStreamWaitEvent, and the
// legacy default stream's implicit waits) names a stream and a position in
// it; running the wait first runs that stream up to that position.  A wait
// always names an op queued before the wait itself, so waits never form a
// cycle and every progress call ends.
//
// An op of a context with a sticky fault is dropped instead of run (the
// stream still moves past it).  An op that finds its memory gone when it
// runs (freed in between) faults its context with CUDA_ERROR_ILLEGAL_ADDRESS,
// like a kernel touching bad memory.
#ifndef TFD_QUEUE_H
#define TFD_QUEUE_H

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>

namespace tfd {

struct Context;

using Clock = std::chrono::steady_clock;

// What an op does when it runs; returns 0 or the CUresult that faults the
// op's context (e.g. CUDA_ERROR_ILLEGAL_ADDRESS).
using OpBody = std::function<int(Context &)>;

struct Op {
    const char *what = "";       // the entry point that queued it
    uint64_t ctx = 0;            // context it runs in
    OpBody body;                 // empty for markers (event records) and waits
    uint64_t wait_key = 0;       // a wait: stream key ...
    uint64_t wait_seq = 0;       // ... that must have run this many ops first
    bool host_function = false;  // runs user code: no driver calls from it
    Clock::time_point due;       // background mode: run no earlier
};

struct Queue {
    uint64_t ctx = 0;
    bool blocking = false;  // a created stream without CU_STREAM_NON_BLOCKING
    bool legacy = false;    // the context's legacy default stream
    std::deque<Op> ops;     // queued, not yet run
    uint64_t enqueued = 0;  // ops ever queued (the last one's sequence number)
    uint64_t executed = 0;  // ops ever run or dropped
    bool running = false;   // its front op is being run (see run_front)
};

// All of the following expect the double's mutex to be held.

// The queue of a stream key (see use_stream); the legacy stream's is made
// on first use.  `blocking` only matters for a created stream's queue.
Queue &queue_of(uint64_t key, uint64_t ctx, bool blocking = false);
// Append an op to the stream `key` of context `ctx`; returns its sequence
// number.  Adds the legacy stream's implicit waits first.  In sync mode the
// stream then runs up to it; in background mode the double's thread is told.
// On a capturing stream the op becomes a node of the capture instead, and 0
// is returned (graph.h).
uint64_t enqueue(uint64_t key, uint64_t ctx, Op op);
// Whether stream `key` has run its op number `seq` (true for a stream that
// no longer exists: it was drained before it went).
bool reached(uint64_t key, uint64_t seq);
// Run stream `key` until it has run op `seq`.  False only when that needs a
// stream that is running an op further up the calling thread's stack (a
// companion's op making other streams progress, in a cycle).
bool advance(uint64_t key, uint64_t seq);
// Run every op queued on `key` so far.
void drain_stream(uint64_t key);
// Run up to n ops of `key`; returns how many ran (0 for a running queue).
uint64_t step(uint64_t key, uint64_t n);
// Every stream of a context; every stream of every context on a device;
// every stream.
void drain_context(uint64_t ctx);
void drain_device(int device);
void drain_all();
// Drain and forget the queues of a context (it is being destroyed).
void drop_context_queues(uint64_t ctx);
// Drain and forget one stream's queue (the stream is being destroyed).
void drop_stream_queue(uint64_t key);
// Ops queued and not yet run on `key` (0 for an unknown key), in all.
uint64_t pending(uint64_t key);
uint64_t pending_total();

// Whether the calling thread is running a host function (driver calls
// from there are refused with CUDA_ERROR_NOT_PERMITTED, as CUDA forbids).
bool in_host_function();

// Execution mode changes (tfd_set_execution): starts the background thread
// on first use, wakes it.
void execution_changed();

}  // namespace tfd

#endif
