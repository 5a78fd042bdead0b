// SPDX-License-Identifier: MIT OR Apache-2.0
// Stream capture and graphs: the rules in graph.h (graph memory nodes
// included), and the entry points
// cuStreamBeginCapture, cuStreamEndCapture, cuStreamIsCapturing,
// cuGraphInstantiateWithFlags, cuGraphExecUpdate, cuGraphLaunch,
// cuGraphExecDestroy and cuGraphDestroy.
#include <algorithm>
#include <cstring>

#include "entries.h"
#include "state.h"

namespace tfd {

namespace {

// Every allocation node of `nodes` is held once more (delta 1) or once less
// (-1); a graph allocation nobody holds any more goes.
void hold_allocations(const std::vector<GraphNode> &nodes, int delta)
{
    auto &m = state().device_allocs;
    for (const GraphNode &n : nodes) {
        if (n.kind != NodeKind::mem_alloc)
            continue;
        auto it = m.find(n.dptr);
        if (it == m.end())
            continue;
        it->second.graph_holders += delta;
        if (it->second.graph_holders <= 0)
            release_alloc(it);
    }
}

void drop_nodes(std::vector<GraphNode> &nodes)
{
    hold_allocations(nodes, -1);
    nodes.clear();
}

CUresult invalidate(Capture &c, CUresult code)
{
    c.invalidated = true;
    drop_nodes(c.nodes);
    return code;
}

bool has_memory_nodes(const std::vector<GraphNode> &nodes)
{
    for (const GraphNode &n : nodes)
        if (n.kind == NodeKind::mem_alloc || n.kind == NodeKind::mem_free)
            return true;
    return false;
}

// The allocation nodes of `nodes` that no free node of `nodes` frees.
std::vector<uint64_t> unfreed_allocations(const std::vector<GraphNode> &nodes)
{
    std::vector<uint64_t> live;
    for (const GraphNode &n : nodes) {
        if (n.kind == NodeKind::mem_alloc)
            live.push_back(n.dptr);
        else if (n.kind == NodeKind::mem_free)
            live.erase(std::remove(live.begin(), live.end(), n.dptr), live.end());
    }
    return live;
}

Capture *capture_by_id(uint64_t id)
{
    for (auto &c : state().captures)
        if (c.second.id == id)
            return &c.second;
    return nullptr;
}

GraphNode event_node(NodeKind kind, uint64_t event, uint64_t ctx, const char *what)
{
    GraphNode n;
    n.kind = kind;
    n.event = event;
    n.op.what = what;
    n.op.ctx = ctx;
    return n;
}

GraphNode memory_node(NodeKind kind, uint64_t dptr, uint64_t ctx, const char *what)
{
    GraphNode n = event_node(kind, 0, ctx, what);
    n.dptr = dptr;
    return n;
}

Op wait_for(uint64_t key, uint64_t seq, const char *what)
{
    Op w;
    w.what = what;
    w.wait_key = key;
    w.wait_seq = seq;
    return w;
}

bool same_kind(const GraphNode &a, const GraphNode &b)
{
    return a.kind == b.kind && std::strcmp(a.op.what, b.op.what) == 0;
}

template <class Map>
void reclaim_where(Map &m, uint64_t ctx, int kind)
{
    State &s = state();
    for (auto it = m.begin(); it != m.end();) {
        if (it->second.ctx != ctx) {
            ++it;
            continue;
        }
        hold_allocations(it->second.nodes, -1);
        it = m.erase(it);
        --s.live[kind];
        ++s.reclaimed[kind];
    }
}

}  // namespace

Capture *capture_of(uint64_t key)
{
    auto &m = state().captures;
    auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
}

CUresult capture_gate(uint64_t key)
{
    const Capture *c = capture_of(key);
    return c != nullptr && c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

CUresult refuse_in_capture(uint64_t key)
{
    Capture *c = capture_of(key);
    if (c == nullptr)
        return CUDA_SUCCESS;
    if (c->invalidated)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return invalidate(*c, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

CUresult refuse_context_sync(uint64_t ctx)
{
    CUresult rc = CUDA_SUCCESS;
    for (auto &c : state().captures)
        if (c.second.ctx == ctx)
            rc = invalidate(c.second, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    return rc;
}

CUresult refuse_unsafe_call()
{
    CUresult rc = CUDA_SUCCESS;
    const std::thread::id me = std::this_thread::get_id();
    for (auto &entry : state().captures) {
        Capture &c = entry.second;
        bool forbids = c.mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                       (c.mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && c.thread == me);
        if (forbids)
            rc = invalidate(c, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    }
    return rc;
}

bool capture_op(uint64_t key, Op &op)
{
    Capture *c = capture_of(key);
    if (c == nullptr)
        return false;
    GraphNode n;
    n.op = std::move(op);
    c->nodes.push_back(std::move(n));
    return true;
}

bool recorded_in_open_capture(const Event &e)
{
    return e.captured != 0 && capture_by_id(e.captured) != nullptr;
}

CUresult refuse_captured_event(const Event &e)
{
    Capture *c = e.captured != 0 ? capture_by_id(e.captured) : nullptr;
    return c == nullptr ? CUDA_SUCCESS : invalidate(*c, CUDA_ERROR_CAPTURED_EVENT);
}

CUresult capture_event_record(uint64_t key, uint64_t event, Event &e, unsigned flags, bool *handled)
{
    *handled = true;
    if ((flags & ~unsigned(CU_EVENT_RECORD_EXTERNAL)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    const bool external = (flags & CU_EVENT_RECORD_EXTERNAL) != 0;
    Capture *c = capture_of(key);
    if (c == nullptr) {
        *handled = external;  // the flag is for captures only
        return external ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    }
    if (external)
        c->nodes.push_back(event_node(NodeKind::record, event, c->ctx, "cuEventRecordWithFlags"));
    else
        e.captured = c->id;
    return CUDA_SUCCESS;
}

CUresult capture_stream_wait(uint64_t key, uint64_t event, const Event &e, unsigned flags,
                             bool *handled)
{
    *handled = true;
    const bool external = (flags & CU_EVENT_WAIT_EXTERNAL) != 0;
    Capture *c = capture_of(key);
    if (c == nullptr) {
        if (external)
            return CUDA_ERROR_INVALID_VALUE;
        // The waiting stream would join that capture: not modelled.
        if (recorded_in_open_capture(e))
            return CUDA_ERROR_NOT_SUPPORTED;
        *handled = false;
        return CUDA_SUCCESS;
    }
    if (external) {
        c->nodes.push_back(event_node(NodeKind::wait, event, c->ctx, "cuStreamWaitEvent"));
        return CUDA_SUCCESS;
    }
    if (e.captured == c->id)
        return CUDA_SUCCESS;  // recorded earlier in this capture: in stream order already
    if (recorded_in_open_capture(e))
        return invalidate(*c, CUDA_ERROR_STREAM_CAPTURE_MERGE);
    if (!e.recorded)
        return CUDA_SUCCESS;  // an empty set of work
    return invalidate(*c, CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
}

CUresult capture_mem_alloc(uint64_t key, int device, uint64_t bytes, CUdeviceptr *dptr)
{
    Capture *c = capture_of(key);
    if (c->invalidated)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    CUdeviceptr p = 0;
    CUresult rc = create_alloc(device, c->ctx, bytes, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    state().device_allocs[p].graph_holders = 1;
    c->nodes.push_back(memory_node(NodeKind::mem_alloc, p, c->ctx, "cuMemAllocFromPoolAsync"));
    *dptr = p;
    return CUDA_SUCCESS;
}

CUresult capture_mem_free(uint64_t key, CUdeviceptr dptr)
{
    Capture *c = capture_of(key);
    if (c->invalidated)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    std::vector<uint64_t> live = unfreed_allocations(c->nodes);
    if (std::find(live.begin(), live.end(), dptr) == live.end())
        return CUDA_ERROR_INVALID_VALUE;
    c->nodes.push_back(memory_node(NodeKind::mem_free, dptr, c->ctx, "cuMemFreeAsync"));
    return CUDA_SUCCESS;
}

CUresult free_graph_alloc(DeviceAlloc &a)
{
    if (!a.graph_outstanding)
        return CUDA_ERROR_INVALID_VALUE;
    a.graph_outstanding = false;  // its next launch may allocate it again
    return CUDA_SUCCESS;
}

void drop_capture(uint64_t key)
{
    Capture *c = capture_of(key);
    if (c != nullptr)
        drop_nodes(c->nodes);
    state().captures.erase(key);
}

void reclaim_graphs(uint64_t ctx)
{
    State &s = state();
    for (auto it = s.captures.begin(); it != s.captures.end();) {
        if (it->second.ctx != ctx) {
            ++it;
            continue;
        }
        drop_nodes(it->second.nodes);
        it = s.captures.erase(it);
    }
    reclaim_where(s.graphs, ctx, TFD_GRAPHS);
    reclaim_where(s.graph_execs, ctx, TFD_GRAPH_EXECS);
}

// ---- entry points ------------------------------------------------------------

static CUresult begin_capture(CUstream stream, int mode)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (key == legacy_key(cur->handle))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (capture_of(key) != nullptr)
        return CUDA_ERROR_ILLEGAL_STATE;
    State &s = state();
    Capture c;
    c.id = s.next_capture_id++;
    c.ctx = cur->handle;
    c.mode = mode;
    c.thread = std::this_thread::get_id();
    s.captures[key] = std::move(c);
    return CUDA_SUCCESS;
}

// Ends the capture even when it was invalidated (then with a NULL graph).
// The key of `stream` for the capture calls, which also work on an
// invalidated capture.
static CUresult capture_key(CUstream stream, uint64_t *key)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    return rc == CUDA_SUCCESS ? lookup_stream(stream, *cur, key) : rc;
}

static CUresult end_capture(CUstream stream, CUgraph *out)
{
    uint64_t key = 0;
    CUresult rc = capture_key(stream, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    Capture *c = capture_of(key);
    if (c == nullptr)
        return CUDA_ERROR_ILLEGAL_STATE;
    if (out == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id())
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    State &s = state();
    if (c->invalidated) {
        drop_nodes(c->nodes);
        s.captures.erase(key);
        *out = nullptr;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    Graph g;
    g.ctx = c->ctx;
    g.nodes = std::move(c->nodes);
    s.captures.erase(key);
    uint64_t h = make_handle(Tag::graph);
    s.graphs[h] = std::move(g);
    ++s.live[TFD_GRAPHS];
    *out = handle_ptr<CUgraph>(h);
    return CUDA_SUCCESS;
}

static CUresult is_capturing(CUstream stream, CUstreamCaptureStatus *status)
{
    uint64_t key = 0;
    CUresult rc = capture_key(stream, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (status == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    const Capture *c = capture_of(key);
    *status = c == nullptr     ? CU_STREAM_CAPTURE_STATUS_NONE
              : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                               : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *out, CUgraph graph, unsigned long long flags)
{
    CUresult rc = need_context(nullptr);
    if (rc != CUDA_SUCCESS)
        return rc;
    const unsigned long long known =
        CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
        CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    State &s = state();
    auto g = s.graphs.find(handle_of(graph));
    if (out == nullptr || g == s.graphs.end() || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    GraphExec x;
    x.ctx = g->second.ctx;
    x.nodes = g->second.nodes;
    x.auto_free = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
    hold_allocations(x.nodes, 1);
    uint64_t h = make_handle(Tag::graph_exec);
    s.graph_execs[h] = std::move(x);
    ++s.live[TFD_GRAPH_EXECS];
    *out = handle_ptr<CUgraphExec>(h);
    return CUDA_SUCCESS;
}

// Same node kinds in the same order: the exec takes the graph's nodes (their
// parameters); otherwise it stays as it was.
static CUresult exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
    CUresult rc = need_context(nullptr);
    if (rc != CUDA_SUCCESS)
        return rc;
    State &s = state();
    auto x = s.graph_execs.find(handle_of(exec));
    auto g = s.graphs.find(handle_of(graph));
    if (info == nullptr || x == s.graph_execs.end() || g == s.graphs.end())
        return CUDA_ERROR_INVALID_VALUE;
    std::memset(info, 0, sizeof *info);
    const std::vector<GraphNode> &from = g->second.nodes;
    std::vector<GraphNode> &to = x->second.nodes;
    if (has_memory_nodes(from) || has_memory_nodes(to)) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    if (from.size() != to.size() || g->second.ctx != x->second.ctx) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    for (size_t i = 0; i < from.size(); ++i) {
        if (!same_kind(from[i], to[i])) {
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
            return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        }
    }
    to = from;
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
}

// Queues one node of a launch on `key`.
static void launch_node(uint64_t key, uint64_t ctx, const GraphNode &n)
{
    State &s = state();
    if (n.kind == NodeKind::mem_alloc || n.kind == NodeKind::mem_free)
        return;  // the memory is mapped for as long as the graph exists
    if (n.kind == NodeKind::op) {
        Op copy = n.op;
        enqueue(key, ctx, std::move(copy));
        return;
    }
    Event &e = s.events[n.event];
    if (n.kind == NodeKind::record) {
        Op marker;
        marker.what = "cuEventRecordWithFlags";
        e.stream_key = key;
        e.seq = enqueue(key, ctx, std::move(marker));
        e.recorded = true;
        e.captured = 0;
    } else if (e.recorded && !reached(e.stream_key, e.seq)) {
        enqueue(key, ctx, wait_for(e.stream_key, e.seq, "cuStreamWaitEvent"));
    }
}

static CUresult graph_launch(CUgraphExec exec, CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    State &s = state();
    auto it = s.graph_execs.find(handle_of(exec));
    if (it == s.graph_execs.end())
        return CUDA_ERROR_INVALID_VALUE;
    GraphExec &x = it->second;
    if (x.ctx != cur->handle)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (capture_of(key) != nullptr)
        return refuse_in_capture(key);  // a graph launched into a capture: not modelled
    for (const GraphNode &n : x.nodes)
        if ((n.kind == NodeKind::record || n.kind == NodeKind::wait) &&
            s.events.count(n.event) == 0)
            return CUDA_ERROR_INVALID_HANDLE;  // an event of the graph was destroyed
    // An allocation an earlier launch left allocated is not allocated again.
    std::vector<uint64_t> unfreed = unfreed_allocations(x.nodes);
    for (uint64_t p : unfreed) {
        auto a = s.device_allocs.find(p);
        if (a != s.device_allocs.end() && a->second.graph_outstanding && !x.auto_free)
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (uint64_t p : unfreed) {
        auto a = s.device_allocs.find(p);
        if (a != s.device_allocs.end())
            a->second.graph_outstanding = true;
    }
    // Each launch runs after the exec's previous launch, on whatever stream.
    if (x.last_key != 0 && x.last_key != key && !reached(x.last_key, x.last_seq))
        enqueue(key, cur->handle, wait_for(x.last_key, x.last_seq, "cuGraphLaunch"));
    for (const GraphNode &n : x.nodes)
        launch_node(key, cur->handle, n);
    x.last_key = key;
    x.last_seq = queue_of(key, cur->handle).enqueued;
    return CUDA_SUCCESS;
}

template <class Map>
static CUresult destroy(Map &m, uint64_t h, int kind)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    auto it = m.find(h);
    if (it == m.end())
        return CUDA_ERROR_INVALID_VALUE;
    hold_allocations(it->second.nodes, -1);
    m.erase(it);
    --state().live[kind];
    return CUDA_SUCCESS;
}

CUresult entry::d_cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode)
{
    return run("cuStreamBeginCapture", [&] { return begin_capture(stream, raw_enum(mode)); });
}

CUresult entry::d_cuStreamEndCapture(CUstream stream, CUgraph *graph)
{
    return run("cuStreamEndCapture", [&] { return end_capture(stream, graph); });
}

CUresult entry::d_cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status)
{
    return run("cuStreamIsCapturing", [&] { return is_capturing(stream, status); });
}

CUresult entry::d_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                              unsigned long long flags)
{
    return run("cuGraphInstantiateWithFlags", [&] { return instantiate(exec, graph, flags); });
}

CUresult entry::d_cuGraphExecUpdate(CUgraphExec exec, CUgraph graph,
                                    CUgraphExecUpdateResultInfo *info)
{
    return run("cuGraphExecUpdate", [&] { return exec_update(exec, graph, info); });
}

CUresult entry::d_cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
    return run("cuGraphLaunch", [&] { return graph_launch(exec, stream); });
}

CUresult entry::d_cuGraphExecDestroy(CUgraphExec exec)
{
    return run("cuGraphExecDestroy",
               [&] { return destroy(state().graph_execs, handle_of(exec), TFD_GRAPH_EXECS); });
}

CUresult entry::d_cuGraphDestroy(CUgraph graph)
{
    return run("cuGraphDestroy",
               [&] { return destroy(state().graphs, handle_of(graph), TFD_GRAPHS); });
}

}  // namespace tfd
