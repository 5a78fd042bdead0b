// The frame of calls that queue work on a stream slot: the primary context
// made current (and the caller's put back), the slot's stream created at
// first use, and, for calls that configure per-slot state, the slot lock.
#pragma once

#include "driver/context_scope.h"
#include "runtime/runtime_state.h"

namespace tf {

// Whether a frame runs caller code (callbacks, releases) under the context:
// then the caller's context is put back even if that code moved the thread
// (ContextScope::enter_for_caller_code).
enum class CallerCode : bool { none = false, runs = true };

// Runs body(stream) with the primary context current and slot `slot`'s
// stream created.
template <CallerCode code = CallerCode::none, class Body>
tf_status with_slot_stream(const char *op, RuntimeState &state, int slot, Body &&body) {
    ContextScope scope;
    tf_status st = code == CallerCode::runs
                       ? scope.enter_for_caller_code(state.api(), state.context(), op)
                       : scope.enter(state.api(), state.context(), op);
    if (st != TF_OK) return st;
    CUstream stream = nullptr;
    if ((st = state.slot_stream(op, slot, &stream)) != TF_OK) return st;
    return body(stream);
}

// As with_slot_stream, holding the slot's lock while body(stream, slot)
// runs the caller's code.  A thread that already holds it gets
// TF_ERROR_RUNTIME_STATE.
template <class Body>
tf_status with_locked_slot(const char *op, RuntimeState &state, int slot, Body &&body) {
    return with_slot_stream<CallerCode::runs>(op, state, slot, [&](CUstream stream) -> tf_status {
        StreamSlot &s = state.slot(slot);
        SlotGuard guard;
        tf_status st = guard.acquire(s.lock, op, slot);
        if (st != TF_OK) return st;
        return body(stream, s);
    });
}

}  // namespace tf
