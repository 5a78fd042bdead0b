// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/event.h"

namespace tf {

CUresult destroy_event(const DriverApi &api, const tf_event &e) {
    return api.cuEventDestroy ? api.cuEventDestroy(e.event) : CUDA_ERROR_NOT_FOUND;
}

void drop_event(tf_event *e) {
    if (!drop_reference(e)) return;
    std::shared_ptr<RuntimeState> state = std::move(e->state);
    destroy_in_context(*state, "cuEventDestroy", [&] { return destroy_event(state->api(), *e); });
    quarantine(e);
}  // `state` goes last

}  // namespace tf
