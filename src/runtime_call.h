// The frame of every public function that takes a runtime handle.
#pragma once

#include "api_guard.h"
#include "runtime_handle.h"

namespace tf {

// For calls that touch the device: a valid handle, a usable runtime (not a
// forked child, no sticky fault); a sticky fault the body reports is
// remembered so every later call refuses.
template <class Body>
tf_status runtime_call(const char *op, tf_runtime *rt, Body &&body) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_handle(op, rt);
        if (st != TF_OK) return st;
        RuntimeState &state = *rt->state;
        if ((st = state.check_usable(op)) != TF_OK) return st;
        st = body(state);
        if (st == TF_ERROR_DEVICE_FAULT) state.note_fault();
        return st;
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
