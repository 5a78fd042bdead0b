// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/graph.h"

#include <algorithm>

#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/event.h"
#include "runtime/graph_capture.h"
#include "runtime/graph_workspace.h"
#include "runtime/slot_order.h"
#include "util/log.h"

namespace tf {
namespace {

tf_status instantiate(const DriverApi &api, CUgraph graph, CUgraphExec *out,
                      const char *consequence) {
    if (!api.cuGraphInstantiateWithFlags) return fail_missing("cuGraphInstantiateWithFlags");
    CUgraphExec exec = nullptr;
    CUresult r = api.cuGraphInstantiateWithFlags(&exec, graph, 0);
    if (r != CUDA_SUCCESS) return fail_cuda(api, "cuGraphInstantiateWithFlags", r, consequence);
    *out = exec;
    return TF_OK;
}

void destroy_exec(const DriverApi &api, CUgraphExec exec) {
    CUresult r = api.cuGraphExecDestroy ? api.cuGraphExecDestroy(exec) : CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_DEINITIALIZED) return;
    char what[96];
    log(TF_LOG_WARNING, "%s: cuGraphExecDestroy of the replaced graph failed: %s; it is leaked",
        current_operation(), describe_cuda(api, r, what, sizeof what));
}

// A launch of the old exec may still be in flight and record or wait for
// the events it held: the graph keeps every event either capture used.
void keep_old_events(CaptureContents *fresh, CaptureContents *old) {
    for (tf_event *&e : old->events) {
        if (std::find(fresh->events.begin(), fresh->events.end(), e) != fresh->events.end())
            continue;  // dropped with `old`: the new list holds it too
        fresh->events.push_back(e);
        e = nullptr;
    }
    old->events.erase(std::remove(old->events.begin(), old->events.end(), nullptr),
                      old->events.end());
}

// A slot the graph waits for: its order event recorded anew, so the launch
// waits for what that slot queued before it.
tf_status renew_wait(RuntimeState &state, int other) {
    const DriverApi &api = state.api();
    CUevent order = nullptr, marked = nullptr;
    tf_status st = slot_order_event(api, &state.slot(other).resources.order, &order);
    if (st == TF_OK) st = state.gate(other).mark(api, state.existing_stream(other), order, &marked);
    if (st == TF_OK && marked != order)
        return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                       "the graph waits for slot %d, which is capturing a graph now; launch it "
                       "once that capture has ended",
                       other);
    return st;
}

// The graph's lock, after the lock of the slot whose workspace its work
// uses: slot locks come before graph locks (an update holds its slot's,
// then the graph's), and an update meanwhile may change that slot.
tf_status lock_for_launch(RuntimeState &state, tf_graph *g, WorkspaceLock *ws,
                          std::unique_lock<std::mutex> *out) {
    std::unique_lock<std::mutex> hold(g->mutex);
    while (g->contents.workspace_slot != ws->slot()) {
        const int owner = g->contents.workspace_slot;
        hold.unlock();
        tf_status st = ws->take(state, owner);
        if (st != TF_OK) return st;
        hold.lock();
    }
    *out = std::move(hold);
    return TF_OK;
}

}  // namespace

tf_status instantiate_graph(const DriverApi &api, EndedCapture &&ended, tf_graph *g) {
    tf_status st =
        instantiate(api, ended.graph, &g->exec, "the capture is over and nothing was kept");
    destroy_captured_graph(api, ended.graph);
    if (st == TF_OK) g->contents = std::move(ended.contents);
    return st;
}

tf_status update_graph(const DriverApi &api, EndedCapture &&ended, tf_graph *g, int32_t *in_place) {
    std::lock_guard<std::mutex> hold(g->mutex);
    CUgraphExecUpdateResultInfo info{};
    // Memory nodes cannot change in an update, and a new capture's
    // allocations have new addresses: such graphs are instantiated anew.
    const bool memory = !ended.contents.memory.empty() || !g->contents.memory.empty();
    CUresult r = memory                  ? CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE
                 : api.cuGraphExecUpdate ? api.cuGraphExecUpdate(g->exec, ended.graph, &info)
                                         : CUDA_ERROR_NOT_FOUND;
    CUgraphExec fresh = nullptr;
    // Another topology (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, the exec
    // untouched) or an update that failed otherwise: a new instantiation.
    tf_status st = r == CUDA_SUCCESS
                       ? TF_OK
                       : instantiate(api, ended.graph, &fresh,
                                     "the capture is over; the graph still runs its earlier one");
    destroy_captured_graph(api, ended.graph);
    if (st != TF_OK) return st;
    if (fresh) {
        destroy_exec(api, g->exec);  // freed by the driver once its launches are done
        g->exec = fresh;
    }
    keep_old_events(&ended.contents, &g->contents);
    g->contents = std::move(ended.contents);
    *in_place = r == CUDA_SUCCESS ? 1 : 0;
    return TF_OK;
}

tf_status launch_graph(CallFrame &frame, tf_graph *g) {
    RuntimeState &state = frame.state();
    WorkspaceLock workspace;  // until the launch is queued (runtime/graph_workspace.h)
    std::unique_lock<std::mutex> hold;
    tf_status st = lock_for_launch(state, g, &workspace, &hold);
    if (st != TF_OK) return st;
    HostPool::Use use;              // until the launch is queued: a racing free waits for it
    if (!g->contents.host.empty())  // no pool lock for graphs without page-locked copies
        st = state.host_pool().begin_launch(g->contents.host.data(), g->contents.host.size(),
                                            frame.slot(), frame.stream(), &use);
    if (st == TF_OK && g->contents.waits.any())
        for (int k = 0; k < state.slot_count() && st == TF_OK; ++k)
            if (g->contents.waits.test(static_cast<size_t>(k))) st = renew_wait(state, k);
    if (st == TF_OK)
        st = workspace.slot() < 0 ? TF_CU(state.api(), cuGraphLaunch, g->exec, frame.stream())
                                  : launch_with_workspace(frame, workspace.slot(), g->exec);
    // The launch is queued work the slot's scalar reads cannot see.
    if (st == TF_OK)
        frame.resources().transfer.graph_launched.store(true, std::memory_order_relaxed);
    return st;
}

CUresult destroy_graph(const DriverApi &api, const tf_graph &g) {
    if (!g.exec) return CUDA_SUCCESS;
    return api.cuGraphExecDestroy ? api.cuGraphExecDestroy(g.exec) : CUDA_ERROR_NOT_FOUND;
}

}  // namespace tf
