#include "runtime/shared_object.h"

#include "driver/cuda_status.h"
#include "runtime/runtime_handle.h"
#include "util/log.h"

namespace tf {

tf_status check_object(const SharedObject *o, uint64_t live, const char *what) {
    if (!o) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "%s is NULL", what);
    if (o->magic.load(std::memory_order_acquire) != live)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "%p is not a live %s",
                       static_cast<const void *>(o), what);
    return TF_OK;
}

bool drop_reference(SharedObject *o) {
    if (o->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    o->magic.store(kDeadHandle, std::memory_order_release);
    return true;
}

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
