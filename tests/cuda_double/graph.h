/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Stream capture and graphs in the driver double, as the real driver has them.
//
// cuStreamBeginCapture puts a created stream in capture mode: from then on
// the stream-ordered calls on it are checked as usual and then recorded as
// the nodes of a graph, in call order, instead of being queued; nothing they
// do happens (a kernel's parameters, a host-mode cuBLAS scalar and a
// pageable source are copied at the call, as CUDA copies them into the
// node).  cuStreamEndCapture hands the nodes out as a CUgraph;
// cuGraphInstantiateWithFlags copies them into a CUgraphExec, and each
// cuGraphLaunch queues a copy of them on the launch stream, where they run
// like any other work (queue.h), after the exec's previous launch.
// cuGraphExecUpdate replaces an exec's nodes by a graph's when both have the
// same node kinds in the same order (the entry point that made each node;
// an event record and an event wait node are kinds of their own), and
// otherwise fails with CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, the exec
// unchanged.
//
// What capture does to other calls, with the real driver's codes:
//  * cuStreamSynchronize and cuStreamQuery of a capturing stream, a
//    cuMemcpyDtoHAsync into pageable memory on it, cuEventSynchronize and
//    cuEventQuery of an event last recorded into a capture still open
//    (CUDA_ERROR_CAPTURED_EVENT), cuCtxSynchronize while a stream of the
//    context captures: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the
//    capture is invalidated;
//  * a capturing stream that waits for an event recorded outside the capture
//    (CUDA_ERROR_STREAM_CAPTURE_ISOLATION) or in another capture
//    (CUDA_ERROR_STREAM_CAPTURE_MERGE): likewise invalidated.  With
//    CU_EVENT_WAIT_EXTERNAL the wait becomes an event wait node instead
//    (it waits, at each launch, for the event's latest record before the
//    launch), and cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL) an event
//    record node (each launch records the event); both flags are
//    CUDA_ERROR_INVALID_VALUE outside a capture.  A plain cuEventRecord on a
//    capturing stream marks the event as recorded into the capture and
//    queues nothing;
//  * in CU_STREAM_CAPTURE_MODE_GLOBAL (any thread) and _THREAD_LOCAL (the
//    capturing thread), the potentially unsafe calls cuMemAlloc, cuMemFree,
//    cuMemHostAlloc, cuMemFreeHost, cuMemHostRegister, cuMemHostUnregister
//    and the synchronous copies fail with
//    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the captures that
//    forbid them; _RELAXED forbids none of them, and only _RELAXED captures
//    may be ended from another thread (else
//    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, the capture still open);
//  * once invalidated, every stream-ordered call on the stream fails with
//    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED until cuStreamEndCapture, which
//    ends the capture and returns the same code with a NULL graph.
// Graph memory nodes:
//  * cuMemAllocFromPoolAsync on a capturing stream adds an allocation node:
//    the address is reserved at the call (the pool's device; the pool itself
//    neither holds nor counts it) and stays the same across instantiations
//    and launches; the memory is the graph's, mapped from the capture on
//    until the last capture, graph or executable graph holding the node
//    goes (its contents then persist from launch to launch);
//  * cuMemFreeAsync on a capturing stream of an allocation made earlier in
//    the same capture adds a free node; of any other address it is
//    CUDA_ERROR_INVALID_VALUE, the capture untouched (a free node frees a
//    graph allocation only; the free of another graph's allocation from a
//    capture is not modelled and refused the same way);
//  * a launch of an exec with an allocation node but no free node for it
//    leaves the allocation allocated: a later launch while it still is
//    (no cuMemFreeAsync of it queued since) fails with
//    CUDA_ERROR_INVALID_VALUE, nothing queued, unless the exec was
//    instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
//    cuMemFreeAsync outside a capture frees only such an allocation, any
//    other graph allocation is CUDA_ERROR_INVALID_VALUE, and cuMemFree of
//    one is always refused;
//  * cuGraphExecUpdate refuses (CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED,
//    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) when the exec or the graph has
//    memory nodes: the strictest reading of CUDA's rule that memory nodes
//    cannot change.
// Not modelled, refused with a code instead: cuMemAllocAsync on a capturing
// stream (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidated), a graph
// launched into a capture (likewise), and a stream that joins a capture by
// waiting for one of its events (CUDA_ERROR_NOT_SUPPORTED, the capture
// untouched).
//
// All of the functions below expect the double's mutex to be held.
#ifndef TFD_GRAPH_H
#define TFD_GRAPH_H

#include <cstdint>
#include <thread>
#include <vector>

#include "queue.h"

namespace tfd {

struct Event;
struct DeviceAlloc;

enum class NodeKind { op, record, wait, mem_alloc, mem_free };

struct GraphNode {
    NodeKind kind = NodeKind::op;
    Op op;               // kind op: what runs (op.what names the node's kind)
    uint64_t event = 0;  // record and wait nodes: the event's handle
    uint64_t dptr = 0;   // memory nodes: the graph allocation's address
};

struct Capture {
    uint64_t id = 0;
    uint64_t ctx = 0;
    int mode = 0;  // CUstreamCaptureMode
    std::thread::id thread;
    bool invalidated = false;
    std::vector<GraphNode> nodes;
};

struct Graph {
    uint64_t ctx = 0;
    std::vector<GraphNode> nodes;
};

struct GraphExec {
    uint64_t ctx = 0;
    bool auto_free = false;  // CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
    std::vector<GraphNode> nodes;
    uint64_t last_key = 0;  // where the latest launch's last op sits
    uint64_t last_seq = 0;
};

// The open capture of stream `key`, or nullptr.
Capture *capture_of(uint64_t key);
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED for a stream whose capture was
// invalidated, else CUDA_SUCCESS (every use of a stream asks: use_stream).
CUresult capture_gate(uint64_t key);
// A call the capture of `key` forbids: invalidates it and returns
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; CUDA_SUCCESS when `key` does not
// capture.
CUresult refuse_in_capture(uint64_t key);
// cuCtxSynchronize: refused (as above) while a stream of `ctx` captures.
CUresult refuse_context_sync(uint64_t ctx);
// The potentially unsafe calls: refused while a capture's mode forbids them
// to the calling thread.
CUresult refuse_unsafe_call();
// enqueue(): true when `key` captures and `op` became a node of its graph.
bool capture_op(uint64_t key, Op &op);
// cuEventQuery / cuEventSynchronize: CUDA_ERROR_CAPTURED_EVENT (the capture
// invalidated) for an event last recorded into an open capture.
CUresult refuse_captured_event(const Event &e);
// Whether `e`'s latest record went into a capture that is still open.
bool recorded_in_open_capture(const Event &e);
// cuEventRecord(WithFlags) on stream `key`: *handled when the capture of
// `key` (or the flags) decided the outcome, which is returned.
CUresult capture_event_record(uint64_t key, uint64_t event, Event &e, unsigned flags,
                              bool *handled);
// cuStreamWaitEvent on stream `key`, as above.
CUresult capture_stream_wait(uint64_t key, uint64_t event, const Event &e, unsigned flags,
                             bool *handled);
// cuMemAllocFromPoolAsync on the capturing stream `key`: an allocation node
// of `bytes` on `device`, its address in *dptr.
CUresult capture_mem_alloc(uint64_t key, int device, uint64_t bytes, CUdeviceptr *dptr);
// cuMemFreeAsync on the capturing stream `key`: a free node.
CUresult capture_mem_free(uint64_t key, CUdeviceptr dptr);
// cuMemFreeAsync outside a capture of the graph allocation `a`.
CUresult free_graph_alloc(DeviceAlloc &a);
// A destroyed stream's capture goes with it.
void drop_capture(uint64_t key);
// A destroyed context's captures, graphs and executable graphs.
void reclaim_graphs(uint64_t ctx);

}  // namespace tfd

#endif
