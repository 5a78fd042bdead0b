// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/shared_object.h"

#include "driver/cuda_status.h"
#include "util/log.h"

namespace tf {

bool enter_for_destroy(RuntimeState &state, ContextScope *scope) {
    // A forked child does not own the parent's objects, and a faulted
    // context cannot destroy anything: leak quietly, as teardown does.
    if (state.check_usable() != TF_OK) return false;
    if (scope->enter(state.api(), state.context()) == TF_OK) return true;
    if (current_error().code != CUDA_ERROR_DEINITIALIZED)
        log(TF_LOG_WARNING, "%s; leaking the object", current_error().message);
    return false;
}

void log_destroy_failure(RuntimeState &state, const char *call, CUresult r) {
    if (r == CUDA_ERROR_DEINITIALIZED) return;  // process exit: nobody is left to care
    char what[96];
    log(TF_LOG_WARNING, "%s: %s failed: %s", current_operation(), call,
        describe_cuda(state.api(), r, what, sizeof what));
}

}  // namespace tf
