#include "runtime/call_frame.h"

#include "transfer/device_range.h"

namespace tf {

tf_status enter_slot_stream(const char *op, tf_runtime *rt, ContextScope &scope, int *slot,
                            CUstream *stream) {
    RuntimeState &state = *rt->state;
    tf_status st = scope.enter(state.api(), state.context(), op);
    if (st != TF_OK) return st;
    *slot = handle_slot(rt);
    return state.slot_stream(op, *slot, stream);
}

tf_status HostTransfer::open(const char *op, tf_runtime *rt, const char *device_name,
                             uint64_t device, const char *host_name, const void *host,
                             size_t len) {
    const RuntimeState &state = *rt->state;
    tf_status st = enter_slot_stream(op, rt, scope, &slot, &stream);
    if (st == TF_OK) st = check_device_range(state, op, device_name, device, len);
    if (st == TF_OK) st = classify_host_memory(state.api(), op, host_name, host, &host_kind);
    return st;
}

}  // namespace tf
