// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/graph_workspace.h"

#include <cstring>

#include "driver/cuda_status.h"
#include "runtime/slot_order.h"
#include "util/log.h"

namespace tf {
namespace {

tf_status fail_held_elsewhere(int slot) __attribute__((cold, noinline));
tf_status fail_held_elsewhere(int slot) {
    return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                   "the graph's cuBLAS or cuBLASLt work uses the workspace of slot %d, whose "
                   "lock its launch takes, and this thread holds another slot's lock (inside "
                   "an enqueue callback): waiting for it could deadlock; launch the graph "
                   "outside the callback, or from a callback running on slot %d",
                   slot, slot);
}

tf_status fail_owner_captures(int owner) __attribute__((cold, noinline));
tf_status fail_owner_captures(int owner) {
    return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                   "the graph's cuBLAS or cuBLASLt work uses the workspace of slot %d, which "
                   "is capturing a graph now, so the launch cannot be ordered with that "
                   "slot's work; launch it once that capture has ended, or on slot %d",
                   owner, owner);
}

// The fallback wait failed too: the launch is queued but owner's later work
// is not ordered after it.
tf_status fail_unordered(int slot, int owner) __attribute__((cold, noinline));
tf_status fail_unordered(int slot, int owner) {
    const tf_error_info &e = current_error();
    char cause[TF_ERROR_MESSAGE_CAPACITY];
    std::memcpy(cause, e.message, sizeof cause);  // fail() rewrites the record
    return fail(e.status, e.call, e.code_domain, e.code,
                "the graph is queued on slot %d, but slot %d's later work, which uses the "
                "same cuBLAS workspace, could not be ordered after it (%s)",
                slot, owner, cause);
}

// Owner's later work waits for the launch on the frame's slot: `after`
// recorded there, waited for on owner's stream.  Should either fail, the
// host waits for the frame's stream instead; owner's lock is held, so none
// of owner's work is queued meanwhile.
tf_status order_owner_after(CallFrame &frame, int owner, CUstream theirs, CUevent after) {
    RuntimeState &state = frame.state();
    const DriverApi &api = state.api();
    char cause[TF_ERROR_MESSAGE_CAPACITY] = "";
    tf_status st;
    {
        KeepLastError keep;  // a fallback that works is a success
        CUevent used = nullptr;
        // Through the frame's gate: a capture another thread began on this
        // slot since the launch gets none of this call's records.
        st = state.gate(frame.slot()).mark(api, frame.stream(), after, &used);
        // Owner's lock is held: owner's capture neither begins nor ends.
        if (st == TF_OK) st = TF_CU(api, cuStreamWaitEvent, theirs, used, 0);
        if (st != TF_OK) std::memcpy(cause, current_error().message, sizeof cause);
    }
    if (st == TF_OK) return TF_OK;
    log(TF_LOG_WARNING,
        "%s; waiting for slot %d's stream instead, so that slot %d's later work "
        "runs after the graph",
        cause, frame.slot(), owner);
    st = state.gate(frame.slot()).wait(api, frame.stream());
    return st == TF_OK ? TF_OK : fail_unordered(frame.slot(), owner);
}

}  // namespace

tf_status WorkspaceLock::take(RuntimeState &state, int slot) {
    drop();
    if (slot < 0) return TF_OK;
    SlotLock &lock = state.slot(slot).lock;
    if (!lock.held_here()) {
        if (SlotLock::thread_holds_any()) return fail_held_elsewhere(slot);
        tf_status st = lock.lock(slot);
        if (st != TF_OK) return st;
        locked_ = &lock;
    }
    slot_ = slot;
    return TF_OK;
}

void WorkspaceLock::drop() {
    if (locked_) locked_->unlock();
    locked_ = nullptr;
    slot_ = -1;
}

tf_status launch_with_workspace(CallFrame &frame, int owner, CUgraphExec exec) {
    RuntimeState &state = frame.state();
    const DriverApi &api = state.api();
    if (owner == frame.slot()) return TF_CU(api, cuGraphLaunch, exec, frame.stream());
    CUstream theirs = state.existing_stream(owner);  // made by the capture
    CUevent before = nullptr, after = nullptr, marked = nullptr;
    tf_status st = slot_order_event(api, &state.slot(owner).resources.order, &before);
    if (st == TF_OK) st = slot_order_event(api, &state.slot(frame.slot()).resources.order, &after);
    if (st == TF_OK) st = state.gate(owner).mark(api, theirs, before, &marked);
    if (st == TF_OK && marked != before) return fail_owner_captures(owner);
    if (st == TF_OK) st = TF_CU(api, cuStreamWaitEvent, frame.stream(), before, 0);
    if (st == TF_OK) st = TF_CU(api, cuGraphLaunch, exec, frame.stream());
    if (st != TF_OK) return st;
    // Owner's stream now waits for the graph, which its scalar reads cannot see.
    state.slot(owner).resources.transfer.graph_launched.store(true, std::memory_order_relaxed);
    return order_owner_after(frame, owner, theirs, after);
}

}  // namespace tf
