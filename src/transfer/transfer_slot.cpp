// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/transfer_slot.h"

#include "driver/cuda_status.h"
#include "util/log.h"

namespace tf {
namespace {

// Page-locked, not write-combined: the host reads these buffers.
constexpr unsigned kStagingFlags = 0;

void log_release_failure(const DriverApi &api, const char *call, CUresult r) {
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_DEINITIALIZED) return;
    char code[96];
    log(TF_LOG_WARNING, "%s: %s of transfer staging failed: %s", current_operation(), call,
        describe_cuda(api, r, code, sizeof code));
}

void free_host(const DriverApi &api, void *p) {
    if (!p) return;
    CUresult r = api.cuMemFreeHost ? api.cuMemFreeHost(p) : CUDA_ERROR_NOT_FOUND;
    log_release_failure(api, "cuMemFreeHost", r);
}

void destroy_event(const DriverApi &api, CUevent e) {
    if (!e) return;
    CUresult r = api.cuEventDestroy ? api.cuEventDestroy(e) : CUDA_ERROR_NOT_FOUND;
    log_release_failure(api, "cuEventDestroy", r);
}

void release_ring(const DriverApi &api, StagingRing &ring) {
    for (int i = 0; i < StagingRing::kMaxDepth; ++i) {
        free_host(api, ring.buffer[i]);
        destroy_event(api, ring.landed[i]);
    }
    ring = StagingRing();
}

}  // namespace

tf_status ensure_staging_ring(const DriverApi &api, size_t bytes, int depth, TransferSlot &slot) {
    if (slot.ring.bytes != 0) return TF_OK;
    StagingRing ring;
    tf_status st = TF_OK;
    for (int i = 0; i < depth && st == TF_OK; ++i) {
        void *p = nullptr;
        CUevent e = nullptr;
        if ((st = TF_CU(api, cuMemHostAlloc, &p, bytes, kStagingFlags)) != TF_OK) break;
        ring.buffer[i] = p;
        if ((st = TF_CU(api, cuEventCreate, &e, CU_EVENT_DISABLE_TIMING)) != TF_OK) break;
        ring.landed[i] = e;
    }
    if (st != TF_OK) {
        release_ring(api, ring);  // no copy used it yet: safe to free
        return st;
    }
    ring.bytes = bytes;
    ring.depth = depth;
    slot.ring = ring;
    return TF_OK;
}

void release_transfer_slot(const DriverApi &api, TransferSlot &slot) {
    // Under teardown's operation name (tf_runtime_release).
    release_scalar_mailbox(api, slot.mailbox);
    release_ring(api, slot.ring);
}

}  // namespace tf
