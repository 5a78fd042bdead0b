/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// DevicePool: the device memory of one device, shared by every runtime of
// that device in the process (NOTE [device memory pool]).
//
// tf_alloc takes memory from a memory pool the library creates
// (cuMemPoolCreate, location the device, no IPC handle type) at the first
// allocation, never from the device's default pool, which belongs to every
// library in the process.  Where the device or the driver has no memory
// pools, memory comes from cuMemAlloc and goes back with cuMemFree
// (uncached).  The pool's live allocations, their counters and their
// recorded uses live here too; the pool registry (runtime/pool_registry.h)
// hands the object to runtimes and destroys it with the last one.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "driver/driver_api.h"
#include "runtime/graph_memory.h"
#include "runtime/recorded_uses.h"
#include "tenferro_gpu.h"
#include "transfer/allocation_registry.h"

namespace tf {

class RuntimeState;

// The settings a pool is created with (tf_runtime_options).
struct PoolSettings {
    uint64_t release_threshold = UINT64_MAX;
    uint64_t reserved_limit = 0;  // 0: none
};

class DevicePool {
public:
    DevicePool(int ordinal, CUdevice device, const PoolSettings &settings, uint64_t creator);
    ~DevicePool() = default;
    DevicePool(const DevicePool &) = delete;
    DevicePool &operator=(const DevicePool &) = delete;

    int ordinal() const { return ordinal_; }
    const PoolSettings &settings() const { return settings_; }
    // Identity of the runtime whose options the pool has.
    uint64_t creator() const { return creator_; }
    AllocationRegistry &allocations() { return allocations_; }
    // The addresses of the device's graph allocations (runtime/graph_memory.h).
    GraphAddresses &graph_addresses() { return graph_addresses_; }

    // *out: whether allocations come from the library's pool (the device
    // has memory pools and the driver every entry point they need).  Asked
    // once; a failed query is returned and asked again next time.
    tf_status cached(const DriverApi &api, bool *out);

    // The calls behind tf_alloc, tf_free, tf_memory_*.  The primary context
    // is current; `stream` is the calling slot's.
    tf_status allocate(const DriverApi &api, CUstream stream, size_t bytes, uint64_t *out);
    // *handled false (nothing done) when `ptr` starts no live allocation of
    // this pool: the caller checks it against the driver.
    tf_status free(const DriverApi &api, const RuntimeState &caller, int slot, CUstream stream,
                   uint64_t ptr, bool *handled);
    tf_status record_use(const RuntimeState &caller, int slot, uint64_t ptr);
    tf_status trim(const DriverApi &api, uint64_t keep_bytes);
    // The pool a capture's allocation nodes take their parameters from (made
    // if need be); TF_ERROR_NOT_SUPPORTED where allocations are uncached.
    tf_status graph_pool(const DriverApi &api, CUmemoryPool *out);
    tf_status stats(const DriverApi &api, tf_memory_pool_stats *out);
    tf_status reset_peak(const DriverApi &api);

    // The runtimes of the device, whose slot streams an out-of-memory retry
    // and a trim wait for.  A runtime detaches in its teardown, after its
    // streams were synchronized and before they are destroyed.
    void attach(RuntimeState *runtime);
    void detach(RuntimeState *runtime);

    // The last runtime went: the pool is destroyed (cuMemPoolDestroy; the
    // driver releases it once its outstanding allocations are freed), its
    // events too, in `context` (the primary context).  Failures are
    // logged.  After a sticky fault (`faulted`) the events are leaked with
    // the context and nothing is logged.
    void release(const DriverApi &api, bool faulted, CUcontext context);

private:
    tf_status pool_handle(const DriverApi &api, CUmemoryPool *out);
    tf_status create_pool(const DriverApi &api);
    CUresult allocate_once(const DriverApi &api, CUstream stream, size_t bytes, bool cached,
                           CUdeviceptr *p);
    tf_status retry_after_oom(const DriverApi &api, CUstream stream, size_t bytes, bool cached,
                              CUdeviceptr *p) __attribute__((cold, noinline));
    tf_status return_cached_memory(const DriverApi &api, bool cached);
    tf_status sync_device_slots(const DriverApi &api);
    tf_status release_host_caches(const DriverApi &api);
    tf_status fail_out_of_memory(const DriverApi &api, size_t bytes, bool cached)
        __attribute__((cold, noinline));
    tf_status reserved_bytes(const DriverApi &api, bool cached, const MemoryCounters &c,
                             uint64_t *current, uint64_t *peak);
    tf_status allocate_slow(const DriverApi &api, CUstream stream, size_t bytes, bool tried,
                            CUresult r, CUdeviceptr *p) __attribute__((noinline));
    void give_back_unregistered(const DriverApi &api, CUstream stream, CUdeviceptr p, size_t bytes)
        __attribute__((cold, noinline));
    tf_status driver_free(const DriverApi &api, CUstream stream, bool cached, uint64_t ptr,
                          size_t bytes);

    const int ordinal_;
    const CUdevice device_;
    const PoolSettings settings_;
    const uint64_t creator_;

    std::atomic<int> cached_{-1};  // -1 not asked yet, else 0 or 1
    std::atomic<int> integrated_{-1};
    std::atomic<CUmemoryPool> pool_{nullptr};
    std::mutex create_mutex_;  // serializes the pool's creation only
    // Uncached: bytes taken from cuMemAlloc, counted before the call so that
    // a reserved_limit holds under concurrent allocations.
    std::atomic<uint64_t> uncached_reserved_{0};

    AllocationRegistry allocations_;
    GraphAddresses graph_addresses_;
    RecordedUses uses_;

    std::mutex runtimes_mutex_;
    std::vector<RuntimeState *> runtimes_;
};

// The calling runtime's answer to DevicePool::cached (TF_CAP_STREAM_ORDERED_ALLOC).
tf_status memory_pools_supported(const RuntimeState &state, bool *out);

// tf_free of an address the driver refused (CUDA_ERROR_INVALID_VALUE from
// `call`): TF_ERROR_INVALID_ARGUMENT, "not the start of an allocation".
tf_status fail_not_start(const char *call, uint64_t ptr, CUresult r)
    __attribute__((cold, noinline));

}  // namespace tf
