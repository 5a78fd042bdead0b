/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The state shared by every handle of one runtime.
#pragma once

#include <cuda.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "driver/driver_api.h"
#include "driver/primary_context.h"
#include "runtime/device_pool.h"
#include "runtime/retirement_queue.h"
#include "runtime/stream_slot.h"
#include "tenferro_gpu.h"
#include "transfer/capture_gate.h"
#include "transfer/host_pool.h"
#include "transfer/transfer_state.h"
#include "util/fork_guard.h"
#include "util/thread_sequence.h"

namespace tf {

struct RuntimeOptions {
    uint32_t stream_slots = TF_DEFAULT_STREAM_SLOTS;
    uint64_t cublas_workspace_bytes = TF_DEFAULT_CUBLAS_WORKSPACE_BYTES;
    uint32_t retirement_capacity = TF_DEFAULT_RETIREMENT_CAPACITY;
    uint32_t download_threads = 0;          // 0: the library default (transfer/transfer_options.h)
    uint32_t download_chunk_bytes = 0;      // 0: the library default
    uint64_t memory_release_threshold = 0;  // 0: the default (runtime/pool_registry.h)
    uint64_t memory_reserved_limit = 0;     // 0: none, or the device pool's
};

class RuntimeState {
public:
    // Driver init, device lookup, primary context retain, device description;
    // the retain is released again on every failure after it.
    static tf_status create(int32_t ordinal, const RuntimeOptions &options,
                            std::shared_ptr<RuntimeState> *out);
    // Teardown (runtime/runtime_teardown.cpp).
    ~RuntimeState();
    RuntimeState(const RuntimeState &) = delete;
    RuntimeState &operator=(const RuntimeState &) = delete;

    const DriverApi &api() const { return *api_; }
    CUcontext context() const { return primary_.context(); }
    CUdevice device() const { return primary_.device(); }
    const tf_device_properties &info() const { return info_; }
    const RuntimeOptions &options() const { return options_; }
    uint64_t identity() const { return identity_; }
    uint64_t allocation_domain() const { return allocation_domain_; }

    int slot_count() const { return static_cast<int>(options_.stream_slots); }
    int slot_for_thread() const {
        return static_cast<int>(thread_sequence() % options_.stream_slots);
    }
    StreamSlot &slot(int index) { return slots_[index]; }
    // Whether a slot captures a graph, and marks of its work from outside
    // it (transfer/capture_gate.h, NOTE [capture]).
    CaptureGate &gate(int index) const { return gates_[index]; }

    // TF_OK unless this is a forked child of the creating process or the
    // device reported a sticky fault; then records why.
    tf_status check_usable() const {
        if (forked()) return fail_forked();
        if (fault_phase_.load(std::memory_order_acquire) == kFaultRecorded) return fail_faulted();
        return TF_OK;
    }

    // Whether this process is a child forked from the one that created the
    // runtime.
    bool forked() const { return fork_generation_ != fork_generation(); }

    // After a call failed with TF_ERROR_DEVICE_FAULT: remember the thread's
    // last error as the reason every later call refuses.
    void note_fault();
    bool faulted() const { return fault_phase_.load(std::memory_order_acquire) != kFaultNone; }

    // The slot's stream, created at first use.  The primary context must be
    // current on the calling thread.
    tf_status slot_stream(int slot, CUstream *out);
    // The slot's stream if it was created, else NULL.  No driver call.
    CUstream existing_stream(int slot) const {
        return slots_[slot].stream.load(std::memory_order_acquire);
    }

    // Pending workspace retirements (runtime/retirement_queue.h).
    RetirementQueue &retirements() { return retirements_; }
    // Copy threads and cached driver answers of the transfers.
    TransferState &transfers() const { return transfers_; }
    // Page-locked host memory (tf_host_alloc, tf_host_register).
    HostPool &host_pool() const { return host_pool_; }
    // The device's memory (tf_alloc), shared with its other runtimes.
    DevicePool &device_pool() const { return *device_pool_; }
    // Its live allocations, for the address checks.
    const AllocationRegistry &allocations() const { return device_pool_->allocations(); }

private:
    RuntimeState(const DriverApi &api, const RuntimeOptions &options);
    tf_status fail_forked() const __attribute__((cold, noinline));
    tf_status fail_faulted() const __attribute__((cold, noinline));
    void teardown();
    bool synchronize_all_streams();
    void release_stream_resources();
    tf_status join_device_pool();
    void leave_device_pool();
    void hand_over_held_blocks(bool idle, bool quiet);

    static constexpr int kFaultNone = 0, kFaultWriting = 1, kFaultRecorded = 2;

    // What every call reads (the table, the slot count, the context, the
    // fork and fault checks, the slots) comes first: two cache lines,
    // however far the driver's work between two calls pushed them out.
    const DriverApi *api_;
    RuntimeOptions options_;
    PrimaryContextRetain primary_;
    uint32_t fork_generation_ = 0;
    std::atomic<int> fault_phase_{kFaultNone};
    std::unique_ptr<StreamSlot[]> slots_;
    tf_device_properties info_{};
    uint64_t identity_ = 0;
    uint64_t allocation_domain_ = 0;
    pid_t creator_pid_ = 0;
    std::unique_ptr<CaptureGate[]> gates_;  // before host_pool_, which uses them
    std::mutex create_mutex_;               // serializes stream creation only
    RetirementQueue retirements_;

    int32_t fault_code_ = 0;
    char fault_detail_[TF_ERROR_MESSAGE_CAPACITY] = {0};

    mutable TransferState transfers_;    // only caches and threads: no logical state
    mutable HostPool host_pool_;         // locks itself
    DevicePool *device_pool_ = nullptr;  // a reference (runtime/pool_registry.h)
};

}  // namespace tf
