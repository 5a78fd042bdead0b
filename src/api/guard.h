/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The guard around every extern "C" body, and the handle checks that open
// the calls on a runtime and on its objects.
//
// guarded()        no C++ exception crosses the ABI;
// runtime_call()   a valid handle of a usable runtime (not a forked child, no
//                  sticky fault); a sticky fault the body reports is
//                  remembered so every later call refuses;
// runtime_query()  a valid handle, for answers from the handle alone;
// object_call()    the same as runtime_call() for an event or a module;
// retain_handle(), release_handle(), release_shared()
//                  the retain and release of every kind of handle.
// What a body needs of the device (the context, its slot's stream, the slot
// lock) it asks of a CallFrame (runtime/call_frame.h).
#pragma once

#include <exception>
#include <memory>
#include <new>

#include "runtime/runtime_handle.h"
#include "runtime/shared_object.h"
#include "util/error.h"
#include "util/unwind.h"

namespace tf {

// Runs `body` as operation `op` (the public function's name, which every
// failure and log line of the call carries: NOTE [operation name] in
// util/error.h) and maps any exception it lets escape to a status.
//   std::bad_alloc      -> TF_ERROR_OUT_OF_MEMORY
//   std::exception, ... -> TF_ERROR_INTERNAL (a bug in this library)
// Thread cancellation (abi::__forced_unwind, util/unwind.h) must keep unwinding,
// so it is rethrown; swallowing it would terminate the process.
template <class Body>
tf_status guarded(const char *op, Body &&body) {
    OperationScope operation(op);
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return TF_FAIL(TF_ERROR_OUT_OF_MEMORY, "host memory exhausted");
    } catch (const std::exception &e) {
        return TF_FAIL(TF_ERROR_INTERNAL, "unexpected C++ exception: %s", e.what());
    } catch (...) {
        if (foreign_unwinding()) throw;
        return TF_FAIL(TF_ERROR_INTERNAL, "unexpected exception of unknown type");
    }
}

// A usable runtime, then the body; a sticky fault the body reports is
// remembered so every later call refuses.
template <class Body>
tf_status call_usable(RuntimeState &state, Body &&body) {
    tf_status st = state.check_usable();
    if (st != TF_OK) return st;
    st = body(state);
    if (st == TF_ERROR_DEVICE_FAULT) state.note_fault();
    return st;
}

// For calls that touch the device: a valid handle and a usable runtime.
template <class Body>
tf_status runtime_call(const char *op, tf_runtime *rt, Body &&body) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_handle(rt);
        if (st != TF_OK) return st;
        return call_usable(*rt->state, body);
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
        tf_status st = check_handle(rt);
        if (st != TF_OK) return st;
        std::shared_ptr<RuntimeState> keep = rt->state;
        return call_usable(*keep, body);
    });
}

// For queries answered from the handle alone (no device work).
template <class Body>
tf_status runtime_query(const char *op, const tf_runtime *rt, Body &&body) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_handle(rt);
        if (st != TF_OK) return st;
        return body(*rt->state);
    });
}

// tf_*_retain of a handle of `kind` (NOTE [handle model], runtime/handle.h).
inline tf_status retain_handle(const char *op, Handle *h, const HandleKind &kind) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_handle(kind, h);
        if (st == TF_OK) retain_handle(h);
        return st;
    });
}

// tf_*_release of a handle `obj` of `kind` (NOTE [handle model]): NULL is a
// no-op; the last reference runs release_contents(obj), which gives back
// what the handle holds, then the shell goes to the quarantine, where it
// is recognised as released.
template <class T, class ReleaseContents>
tf_status release_handle(const char *op, T *obj, const HandleKind &kind,
                         ReleaseContents &&release_contents) {
    if (!obj) return TF_OK;
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_handle(kind, obj);
        if (st != TF_OK || !drop_reference(obj)) return st;
        release_contents(obj);
        quarantine(obj);
        return TF_OK;
    });
}

// tf_*_release of an event or a module: the last reference destroys the
// driver object (destroy(api, *obj) -> CUresult) in its runtime's context,
// then drops the runtime reference (which may tear the runtime down).
template <class T, class Destroy>
tf_status release_shared(const char *op, T *obj, const HandleKind &kind, const char *call,
                         Destroy destroy) {
    return release_handle(op, obj, kind, [&](T *dead) {
        std::shared_ptr<RuntimeState> state = std::move(dead->state);
        destroy_in_context(*state, call, [&] { return destroy(state->api(), *dead); });
    });  // `state` goes last
}

// The frame of calls on an event or a module: a live handle, its runtime
// usable, a sticky fault the body reports remembered by the runtime.
template <class Body>
tf_status object_call(const char *op, SharedObject *o, const HandleKind &kind, Body &&body) {
    return guarded(op, [&]() -> tf_status {
        tf_status st = check_handle(kind, o);
        if (st != TF_OK) return st;
        return call_usable(*o->state, body);
    });
}

}  // namespace tf
