// Scoped activation of a CUDA context that puts the caller's context back.
//
// The caller's exact current context (NULL included) is saved with one
// cuCtxGetCurrent; if the target is already current nothing else happens.
// Otherwise the target is made current and, when the scope ends, by return
// or by exception, the saved context is made current again.  No runtime-API
// device is touched: that costs 4x-19x more and can create a stray context.
#pragma once

#include <cuda.h>

#include "driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

class ContextScope {
public:
    ContextScope() = default;
    ~ContextScope() {
        if (switched_) restore();
    }
    ContextScope(const ContextScope &) = delete;
    ContextScope &operator=(const ContextScope &) = delete;

    // Makes `target` current.  On failure the thread's context is what it
    // was (a partial activation is rolled back) and the error is recorded.
    tf_status enter(const DriverApi &api, CUcontext target, const char *op);

    // Restores now instead of at scope end (idempotent).
    void leave() {
        if (switched_) restore();
    }

    // The context that was current before enter().
    CUcontext saved() const { return saved_; }

    // Do not log a restore that fails because the driver is deinitialized
    // (teardown at process exit).
    void quiet_when_deinitialized() { quiet_when_deinitialized_ = true; }

private:
    void restore();

    const DriverApi *api_ = nullptr;
    const char *op_ = nullptr;
    CUcontext saved_ = nullptr;
    bool switched_ = false;
    bool quiet_when_deinitialized_ = false;
};

}  // namespace tf
