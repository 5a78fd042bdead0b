// The frames of public functions on a runtime's objects (tf_event,
// tf_module): retain, release, and calls that use the object's runtime.
#pragma once

#include <memory>

#include "api/guard.h"
#include "runtime/shared_object.h"

namespace tf {

// tf_*_retain of an object of kind `live`.
inline tf_status retain_shared(const char *op, SharedObject *o, uint64_t live, const char *what) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_object(op, o, live, what);
        if (st == TF_OK) o->refs.fetch_add(1, std::memory_order_relaxed);
        return st;
    });
}

// tf_*_release of `obj` (a struct whose first member `base` is its
// SharedObject): NULL is a no-op; the last reference runs
// destroy(api, *obj) -> CUresult through destroy_in_context, frees the
// object, then drops its runtime reference (which may tear the runtime down).
template <class T, class Destroy>
tf_status release_shared(const char *op, T *obj, uint64_t live, const char *what,
                         const char *call, Destroy destroy) {
    if (!obj) return TF_OK;
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_object(op, &obj->base, live, what);
        if (st != TF_OK || !drop_reference(&obj->base)) return st;
        std::unique_ptr<T> dead(obj);
        std::shared_ptr<RuntimeState> state = std::move(dead->base.state);
        destroy_in_context(*state, op, call, [&] { return destroy(state->api(), *dead); });
        return TF_OK;  // `state` goes last
    });
}

// The frame of calls on an object: checked, its runtime usable, a sticky
// fault the body reports remembered by the runtime.
template <class Body>
tf_status object_call(const char *op, SharedObject *o, uint64_t live, const char *what,
                      Body &&body) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_object(op, o, live, what);
        if (st != TF_OK) return st;
        RuntimeState &state = *o->state;
        if ((st = state.check_usable(op)) != TF_OK) return st;
        st = body(state);
        if (st == TF_ERROR_DEVICE_FAULT) state.note_fault();
        return st;
    });
}

}  // namespace tf
