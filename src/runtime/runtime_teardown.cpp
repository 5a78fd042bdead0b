// SPDX-License-Identifier: MIT OR Apache-2.0
// Teardown of a runtime when its last handle is released.
//
// Order: end a capture still open on a slot (dropping its graph);
// synchronize every created stream; only if all of them retired,
// release what hangs off the slots and destroy the streams, otherwise leak
// them on purpose (the device may still use them); release the primary
// context; put the caller's context back.  After a sticky fault, in a forked
// child, or once the driver is deinitialized, the device is not touched and
// the resources are leaked without a warning.  Page-locked host memory
// (transfer/host_pool.h) follows the streams: freed with them, or leaked
// with them; except the blocks the caller still holds, which keep the
// primary context retained until they are freed (NOTE [blocks outliving
// their runtime]).  The runtime's reference to its device's memory pool
// goes before the primary context: the last runtime of the device destroys
// the pool (runtime/pool_registry.h); its uses and its place in the pool's
// list of runtimes go once its streams are synchronized, before they are
// destroyed.
#include <cstdio>

#include "driver/context_scope.h"
#include "driver/cuda_status.h"
#include "runtime/graph_capture.h"
#include "runtime/runtime_state.h"
#include "util/error.h"
#include "runtime/pool_registry.h"
#include "util/log.h"

namespace tf {
namespace {

constexpr char kOp[] = "tf_runtime_release";

bool quiet_failure(CUresult r) { return r == CUDA_ERROR_DEINITIALIZED; }

}  // namespace

RuntimeState::~RuntimeState() {
    // Teardown only formats into fixed buffers; the guard is belt and braces
    // for a destructor that must not throw.
    try {
        teardown();
    } catch (...) {
        log(TF_LOG_ERROR, "%s: unexpected exception during teardown", kOp);
    }
}

void RuntimeState::teardown() {
    KeepLastError keep;  // teardown never changes the caller's last error
    // Whatever call dropped the last handle, what teardown reports and logs
    // names tf_runtime_release.
    OperationScope operation(kOp);
    if (forked()) {
        // A forked child: the context, streams and memory pool belong to the
        // parent (the child's pool registry starts empty).
        primary_.abandon();
        return;
    }
    bool any_stream = false;
    for (int i = 0; i < slot_count(); ++i) any_stream |= existing_stream(i) != nullptr;
    ContextScope scope;
    scope.quiet_when_deinitialized();
    bool idle = false;   // every stream retired: nothing the runtime queued still runs
    bool quiet = false;  // the driver is gone (process exit)
    // Page-locked blocks need the context even when no stream was made.
    if ((any_stream || !host_pool_.empty()) && !faulted()) {
        // Pending releases run below: caller code.
        if (scope.enter_for_caller_code(*api_, context()) != TF_OK) {
            quiet = quiet_failure(static_cast<CUresult>(current_error().code));
            if (!quiet)
                log(TF_LOG_WARNING, "%s; leaking the runtime's streams and their resources",
                    current_error().message);
        } else {
            for (int i = 0; i < slot_count(); ++i) discard_capture(*this, i);
            if (!any_stream || synchronize_all_streams()) {
                if (device_pool_) device_pool_->detach(this);
                release_stream_resources();
                idle = true;
            }
        }
    }
    leave_device_pool();
    hand_over_held_blocks(idle, quiet);
    primary_.release();  // unless the held blocks took it
    scope.leave();
}

void RuntimeState::leave_device_pool() {
    if (!device_pool_) return;
    device_pool_->detach(this);
    release_device_pool(*api_, device_pool_, faulted(), context());
    device_pool_ = nullptr;
}

// NOTE [blocks outliving their runtime]: the blocks the caller still holds
// take the runtime's primary context retain with them.
void RuntimeState::hand_over_held_blocks(bool idle, bool quiet) {
    std::vector<OrphanBlock> held = host_pool_.take_held_blocks();
    if (!held.empty()) adopt_orphan_blocks(*api_, std::move(primary_), idle, quiet, held);
}

bool RuntimeState::synchronize_all_streams() {
    bool retired = true;
    for (int i = 0; i < slot_count(); ++i) {
        CUstream s = existing_stream(i);
        if (!s) continue;
        CUresult r =
            api_->cuStreamSynchronize ? api_->cuStreamSynchronize(s) : CUDA_ERROR_NOT_FOUND;
        if (r == CUDA_SUCCESS) continue;
        retired = false;
        if (quiet_failure(r) || faulted()) continue;
        char what[96];
        log(TF_LOG_WARNING,
            "%s: cuStreamSynchronize of slot %d failed: %s; leaking every stream of the runtime "
            "and the cuBLAS handles, workspaces and staging buffers on them, which the device "
            "may still use",
            kOp, i, describe_cuda(*api_, r, what, sizeof what));
    }
    return retired;
}

void RuntimeState::release_stream_resources() {
    // Every stream retired: each pending retirement is complete, and its
    // release may still need what the slots hold.
    retirements_.release_all(*api_);
    host_pool_.release_all(*api_);
    transfers_.scalar_kernel.release(*api_);
    for (int i = 0; i < slot_count(); ++i) {
        StreamSlot &slot = slots_[i];
        release_slot_resources(*api_, slot.resources);
        gates_[i].release(*api_);
        CUstream s = existing_stream(i);
        if (!s) continue;
        CUresult r = api_->cuStreamDestroy ? api_->cuStreamDestroy(s) : CUDA_ERROR_NOT_FOUND;
        if (r != CUDA_SUCCESS && !quiet_failure(r)) {
            char what[96];
            log(TF_LOG_WARNING, "%s: cuStreamDestroy of slot %d failed: %s", kOp, i,
                describe_cuda(*api_, r, what, sizeof what));
        }
    }
}

}  // namespace tf
