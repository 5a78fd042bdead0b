// The frame of every public function that takes a runtime handle.
#pragma once

#include <memory>

#include "api/guard.h"
#include "runtime/runtime_handle.h"

namespace tf {

// A usable runtime (not a forked child, no sticky fault), then the body; a
// sticky fault the body reports is remembered so every later call refuses.
template <class Body>
tf_status call_usable(const char *op, RuntimeState &state, Body &&body) {
    tf_status st = state.check_usable(op);
    if (st != TF_OK) return st;
    st = body(state);
    if (st == TF_ERROR_DEVICE_FAULT) state.note_fault();
    return st;
}

// For calls that touch the device: a valid handle and a usable runtime.
template <class Body>
tf_status runtime_call(const char *op, tf_runtime *rt, Body &&body) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_handle(op, rt);
        if (st != TF_OK) return st;
        return call_usable(op, *rt->state, body);
    });
}

// As runtime_call, for the calls that run workspace releases
// (tf_workspace_retire, tf_workspace_poll, tf_runtime_sync): a release may
// drop the last reference to the runtime, so the call keeps the state alive
// until it is over (one shared_ptr copy: not on the hot paths); the runtime
// is then torn down as the call returns.
template <class Body>
tf_status runtime_call_running_releases(const char *op, tf_runtime *rt, Body &&body) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_handle(op, rt);
        if (st != TF_OK) return st;
        std::shared_ptr<RuntimeState> keep = rt->state;
        return call_usable(op, *keep, body);
    });
}

// For queries answered from the handle alone (no device work).
template <class Body>
tf_status runtime_query(const char *op, const tf_runtime *rt, Body &&body) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_handle(op, rt);
        if (st != TF_OK) return st;
        return body(*rt->state);
    });
}

}  // namespace tf
