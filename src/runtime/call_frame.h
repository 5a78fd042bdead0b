/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// CallFrame: what a call on a runtime stands on while it runs.
//
// Every entry point that touches the device builds one frame on its stack
// and asks for what it needs, in this order:
//   enter_context()  the runtime's primary context current (ContextScope:
//                    the caller's context is put back when the frame goes);
//   enter()          that, and the stream of the calling thread's slot
//                    (through the handle: its bound slot, else the thread's),
//                    created at first use; enter_slot() names the slot;
//   lock_slot()      the slot's lock, for calls that use the slot's
//                    resources or run caller code on its stream.
// The frame gives back the lock, then the context, when it goes, by return
// or by exception.  It allocates nothing and adds no atomic operation to
// what those steps cost: one or two cuCtxGetCurrent, one acquire load of
// the stream, and the lock when asked for.
#pragma once

#include <cuda.h>

#include "driver/context_scope.h"
#include "runtime/runtime_handle.h"
#include "runtime/runtime_state.h"
#include "transfer/host_memory_kind.h"

namespace tf {

// Whether a frame runs caller code (callbacks, releases) under the context:
// then the caller's context is put back even if that code moved the thread
// (ContextScope::enter_for_caller_code).
enum class CallerCode : bool { none = false, runs = true };

class CallFrame {
public:
    // A frame for a call through handle `rt` on its runtime.
    explicit CallFrame(tf_runtime *rt) : state_(*rt->state), rt_(rt) {}
    // A frame on a runtime without a handle (calls on an event or module):
    // it has no slot, so only enter_context() applies.
    explicit CallFrame(RuntimeState &state) : state_(state), rt_(nullptr) {}
    ~CallFrame() {
        if (locked_) locked_->unlock();
    }  // then scope_ puts the caller's context back
    CallFrame(const CallFrame &) = delete;
    CallFrame &operator=(const CallFrame &) = delete;

    // Makes the runtime's primary context current until the frame goes.
    tf_status enter_context(CallerCode code = CallerCode::none) {
        return code == CallerCode::runs
                   ? scope_.enter_for_caller_code(state_.api(), state_.context())
                   : scope_.enter(state_.api(), state_.context());
    }
    // enter_context(), then the stream of the handle's slot on this thread.
    tf_status enter(CallerCode code = CallerCode::none) {
        return enter_slot(handle_slot(rt_), code);
    }
    // enter_context(), then the stream of slot `slot`.
    tf_status enter_slot(int slot, CallerCode code = CallerCode::none) {
        tf_status st = enter_context(code);
        if (st != TF_OK) return st;
        slot_ = slot;
        stream_ = state_.existing_stream(slot);
        if (stream_) return TF_OK;
        CUstream made = nullptr;  // a local: the frame's address never escapes
        st = state_.slot_stream(slot, &made);
        stream_ = made;
        return st;
    }
    // After enter(): holds the slot's lock until the frame goes.  A thread
    // that already holds it (a callback calling back into its own slot)
    // gets TF_ERROR_RUNTIME_STATE instead of a deadlock.
    tf_status lock_slot() {
        SlotLock &lock = state_.slot(slot_).lock;
        tf_status st = lock.lock(slot_);
        if (st == TF_OK) locked_ = &lock;
        return st;
    }

    // After enter(): TF_ERROR_RUNTIME_STATE, naming the capture, when the
    // slot's stream captures a graph (NOTE [capture]); `why` says what the
    // call would do that a capture cannot.  The check of every call that
    // must not run inside a capture.
    tf_status refuse_capture(const char *why);

    RuntimeState &state() const { return state_; }
    const DriverApi &api() const { return state_.api(); }
    int slot() const { return slot_; }
    CUstream stream() const { return stream_; }
    // The slot's resources; use them only under lock_slot().
    SlotResources &resources() const { return state_.slot(slot_).resources; }

private:
    RuntimeState &state_;
    const tf_runtime *rt_;
    ContextScope scope_;
    int slot_ = -1;
    CUstream stream_ = nullptr;
    SlotLock *locked_ = nullptr;
};

// The checks of a copy between host and device memory, after enter(): the
// device range inside one allocation of the runtime's device, and the kind
// of host memory (*host_kind).
tf_status check_host_transfer(const CallFrame &frame, const char *device_name, uint64_t device,
                              const char *host_name, const void *host, size_t len,
                              HostMemory *host_kind);

// The end of a synchronous copy between the device and `host` (queued on
// the frame's stream, then waited for; `st` is how that went).  When it
// failed and `host` is page-locked the stream may still read or write it:
// the runtime's blocks and registered ranges there record the use, so
// tf_host_free and tf_host_unregister wait for the stream.  Returns st.
tf_status finish_host_copy(const CallFrame &frame, HostMemory host_kind, const void *host,
                           size_t len, tf_status st);

}  // namespace tf
