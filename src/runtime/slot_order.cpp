// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/slot_order.h"

#include "driver/cuda_status.h"
#include "util/log.h"

namespace tf {

tf_status slot_order_event(const DriverApi &api, SlotOrderEvent *slot, CUevent *out) {
    CUevent e = slot->event.load(std::memory_order_acquire);
    if (!e) {
        tf_status st = TF_CU(api, cuEventCreate, &e, CU_EVENT_DISABLE_TIMING);
        if (st != TF_OK) return st;
        CUevent expected = nullptr;
        if (!slot->event.compare_exchange_strong(expected, e, std::memory_order_acq_rel)) {
            // Another thread published first: use its event, drop ours.
            if (api.cuEventDestroy) api.cuEventDestroy(e);
            e = expected;
        }
    }
    *out = e;
    return TF_OK;
}

void release_slot_order(const DriverApi &api, SlotOrderEvent *slot) {
    CUevent e = slot->event.exchange(nullptr, std::memory_order_acq_rel);
    if (!e) return;
    CUresult r = api.cuEventDestroy ? api.cuEventDestroy(e) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
        char what[96];
        log(TF_LOG_WARNING, "tf_runtime_release: cuEventDestroy of a slot's order event failed: %s",
            describe_cuda(api, r, what, sizeof what));
    }
}

}  // namespace tf
