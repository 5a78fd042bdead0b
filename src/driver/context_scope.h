/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Scoped activation of a CUDA context that puts the caller's context back.
//
// The caller's exact current context (NULL included) is saved with one
// cuCtxGetCurrent; if the target is already current nothing else happens.
// Otherwise the target is made current and, when the scope ends, by return
// or by exception, the saved context is made current again.  No runtime-API
// device is touched: that costs 4x-19x more and can create a stray context.
//
// Calls that run caller code under the context (callbacks, releases) enter
// with enter_for_caller_code(): that code may change the thread's context
// (cuCtxSetCurrent, cuCtxPopCurrent, cudaSetDevice), so when the target was
// already current the scope asks once more at its end (one cuCtxGetCurrent)
// and puts the caller's context back if it differs.  The fast paths are
// inline: tf_with_context's whole cost is two cuCtxGetCurrent and a few
// loads and compares.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

class ContextScope {
public:
    ContextScope() = default;
    ~ContextScope() { leave(); }
    ContextScope(const ContextScope &) = delete;
    ContextScope &operator=(const ContextScope &) = delete;

    // Makes `target` current.  On failure the thread's context is what it
    // was (a partial activation is rolled back) and the error is recorded.
    tf_status enter(const DriverApi &api, CUcontext target) {
        CUcontext current = nullptr;
        tf_status st = read_current(api, &current);
        if (st != TF_OK || current == target) return st;  // fast path: one driver call
        return activate(api, current, target);
    }

    // As enter(), for a scope in which caller code runs: the caller's
    // context is back at scope end even when that code changed it.
    tf_status enter_for_caller_code(const DriverApi &api, CUcontext target) {
        CUcontext current = nullptr;
        tf_status st = read_current(api, &current);
        if (st != TF_OK) return st;
        if (current != target) return activate(api, current, target);
        remember(api, current, Exit::verify);  // fast path: nothing to switch, ask again at the end
        return TF_OK;
    }

    // Switches nothing: keeps the context current now across caller code
    // run before the scope ends (one cuCtxGetCurrent now, one at the end).
    tf_status hold(const DriverApi &api) {
        CUcontext current = nullptr;
        tf_status st = read_current(api, &current);
        if (st == TF_OK) remember(api, current, Exit::verify);
        return st;
    }

    // Restores now instead of at scope end (idempotent).
    void leave() {
        if (exit_ == Exit::none) return;
        const Exit exit = exit_;
        exit_ = Exit::none;
        // A failed question is answered by restoring: never leave the
        // thread elsewhere.
        if (exit == Exit::verify && still_current(*api_, saved_)) return;
        restore(*api_, saved_, quiet_when_deinitialized_);
    }

    // Do not log a restore that fails because the driver is deinitialized
    // (teardown at process exit).
    void quiet_when_deinitialized() { quiet_when_deinitialized_ = true; }

private:
    // What the scope's end does: nothing, put the saved context back, or
    // check that it is still current (and put it back if not).
    enum class Exit : uint8_t { none, restore, verify };

    // The helpers below take values, never the scope's address, so that a
    // scope (and the call frame holding it) can live in registers: the fast
    // paths then cost the driver calls and a few compares.
    static tf_status read_current(const DriverApi &api, CUcontext *out) {
        if (!api.cuCtxGetCurrent || !api.cuCtxSetCurrent) return fail_missing_entry(api);
        CUresult r = api.cuCtxGetCurrent(out);
        return r == CUDA_SUCCESS ? TF_OK : fail_read(api, r);
    }
    static bool still_current(const DriverApi &api, CUcontext saved) {
        CUcontext now = nullptr;
        return api.cuCtxGetCurrent(&now) == CUDA_SUCCESS && now == saved;
    }
    tf_status activate(const DriverApi &api, CUcontext current, CUcontext target) {
        tf_status st = switch_from(api, current, target);
        if (st == TF_OK) remember(api, current, Exit::restore);
        return st;
    }
    void remember(const DriverApi &api, CUcontext current, Exit exit) {
        api_ = &api;
        saved_ = current;
        exit_ = exit;
    }
    static tf_status fail_missing_entry(const DriverApi &api) __attribute__((cold, noinline));
    static tf_status fail_read(const DriverApi &api, CUresult r) __attribute__((cold, noinline));
    // Makes `target` current; on failure puts `current` back and records why.
    static tf_status switch_from(const DriverApi &api, CUcontext current, CUcontext target);
    // Makes `saved` current again; a failure is logged.
    static void restore(const DriverApi &api, CUcontext saved, bool quiet_when_deinitialized);

    const DriverApi *api_ = nullptr;
    CUcontext saved_ = nullptr;
    Exit exit_ = Exit::none;
    bool quiet_when_deinitialized_ = false;
};

}  // namespace tf
