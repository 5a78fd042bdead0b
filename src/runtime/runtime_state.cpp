// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/runtime_state.h"

#include <unistd.h>

#include <cstring>

#include "driver/context_scope.h"
#include "driver/cuda_status.h"
#include "driver/device_discovery.h"
#include "runtime/pool_registry.h"
#include "util/error.h"

namespace tf {
namespace {

// Identities and allocation domains come from one counter, so no identity
// ever equals an allocation domain and neither is ever reused.
std::atomic<uint64_t> g_next_id{1};

}  // namespace

RuntimeState::RuntimeState(const DriverApi &api, const RuntimeOptions &options)
    : api_(&api),
      options_(options),
      slots_(new StreamSlot[options.stream_slots]),
      gates_(new CaptureGate[options.stream_slots]),
      host_pool_(static_cast<int>(options.stream_slots), gates_.get()) {}

tf_status RuntimeState::create(int32_t ordinal, const RuntimeOptions &options,
                               std::shared_ptr<RuntimeState> *out) {
    const DriverApi *api = init_driver();
    if (!api) return current_error().status;
    CUdevice device = 0;
    tf_status st = lookup_device(*api, ordinal, &device);
    if (st != TF_OK) return st;
    // The state owns the retain from here on: every failure below (and
    // bad_alloc, by unwinding) releases it through the state's destructor.
    std::shared_ptr<RuntimeState> state(new RuntimeState(*api, options));
    install_fork_handler();
    state->fork_generation_ = fork_generation();
    state->creator_pid_ = getpid();
    if ((st = state->primary_.retain(*api, device)) != TF_OK) return st;
    if ((st = describe_device(*api, ordinal, device, &state->info_)) != TF_OK) return st;
    state->identity_ = g_next_id.fetch_add(1, std::memory_order_relaxed);
    state->allocation_domain_ = g_next_id.fetch_add(1, std::memory_order_relaxed);
    if ((st = state->join_device_pool()) != TF_OK) return st;
    *out = std::move(state);
    return TF_OK;
}

// The device's pool (runtime/pool_registry.h), with this runtime's memory
// options: an explicit field must agree with a pool that already exists.
tf_status RuntimeState::join_device_pool() {
    PoolRequest request;
    request.explicit_threshold = options_.memory_release_threshold != 0;
    request.explicit_limit = options_.memory_reserved_limit != 0;
    if (request.explicit_threshold)
        request.settings.release_threshold = options_.memory_release_threshold;
    request.settings.reserved_limit = options_.memory_reserved_limit;
    // maxSize (CUmemPoolProps) came with CUDA 12.2.
    if (request.explicit_limit && api_->driver_version != 0 && api_->driver_version < 12020)
        return TF_FAIL(TF_ERROR_NOT_SUPPORTED,
                       "memory_reserved_limit needs a driver of CUDA 12.2 or later; this one is "
                       "CUDA %d.%d",
                       api_->driver_version / 1000, api_->driver_version % 1000 / 10);
    DevicePool *pool = nullptr;
    tf_status st = acquire_device_pool(info_.ordinal, device(), request, identity_, &pool);
    if (st != TF_OK) return st;
    device_pool_ = pool;  // released by the teardown from here on
    pool->attach(this);
    return TF_OK;
}

tf_status RuntimeState::slot_stream(int slot, CUstream *out) {
    CUstream s = existing_stream(slot);
    if (s) {
        *out = s;
        return TF_OK;
    }
    std::lock_guard<std::mutex> hold(create_mutex_);
    s = existing_stream(slot);
    if (!s) {
        tf_status st = TF_CU(*api_, cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
        if (st != TF_OK) return st;
        slots_[slot].stream.store(s, std::memory_order_release);
    }
    *out = s;
    return TF_OK;
}

void RuntimeState::note_fault() {
    const tf_error_info &e = current_error();
    if (e.status != TF_ERROR_DEVICE_FAULT) return;
    // A refusal (no driver call named) repeats a fault some runtime already
    // recorded, possibly another one: a peer copy to a faulted destination
    // must not poison a healthy source.
    if (e.call[0] == '\0') return;
    int expected = kFaultNone;
    if (!fault_phase_.compare_exchange_strong(expected, kFaultWriting)) return;
    fault_code_ = e.code;
    std::snprintf(fault_detail_, sizeof fault_detail_, "%s", e.message);
    fault_phase_.store(kFaultRecorded, std::memory_order_release);
}

tf_status RuntimeState::fail_faulted() const {
    return fail(TF_ERROR_DEVICE_FAULT, "", TF_CODE_CUDA, fault_code_,
                "the runtime's context is unusable after a sticky device fault (%s); release "
                "the runtime and create a new one",
                fault_detail_);
}

tf_status RuntimeState::fail_forked() const {
    return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                   "this runtime was created in process %d, and this process (%d) is a child "
                   "forked from it; CUDA cannot be used across fork(), so create runtimes in "
                   "the child itself",
                   static_cast<int>(creator_pid_), static_cast<int>(getpid()));
}

}  // namespace tf
