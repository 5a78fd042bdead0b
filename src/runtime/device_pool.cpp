// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/device_pool.h"

#include <algorithm>
#include <cstring>

#include "driver/context_scope.h"
#include "driver/cuda_status.h"
#include "runtime/out_of_memory.h"
#include "runtime/runtime_state.h"
#include "util/log.h"

namespace tf {
namespace {

bool has_pool_entry_points(const DriverApi &api) {
    return api.cuMemPoolCreate && api.cuMemPoolDestroy && api.cuMemPoolSetAttribute &&
           api.cuMemPoolGetAttribute && api.cuMemPoolTrimTo && api.cuMemAllocFromPoolAsync &&
           api.cuMemFreeAsync;
}

const char *alloc_call(bool cached) { return cached ? "cuMemAllocFromPoolAsync" : "cuMemAlloc"; }
const char *free_call(bool cached) { return cached ? "cuMemFreeAsync" : "cuMemFree"; }

}  // namespace

tf_status fail_not_start(const char *call, uint64_t ptr, CUresult r) {
    return fail(TF_ERROR_INVALID_ARGUMENT, call, TF_CODE_CUDA, r,
                "ptr 0x%llx is not the start of an allocation (%s answered "
                "CUDA_ERROR_INVALID_VALUE)",
                static_cast<unsigned long long>(ptr), call);
}

DevicePool::DevicePool(int ordinal, CUdevice device, const PoolSettings &settings, uint64_t creator)
    : ordinal_(ordinal),
      device_(device),
      settings_(settings),
      creator_(creator),
      allocations_(ordinal) {}

tf_status DevicePool::cached(const DriverApi &api, bool *out) {
    int known = cached_.load(std::memory_order_acquire);
    if (known >= 0) {
        *out = known != 0;
        return TF_OK;
    }
    int value = 0;
    if (has_pool_entry_points(api)) {
        tf_status st = TF_CU(api, cuDeviceGetAttribute, &value,
                             CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device_);
        if (st != TF_OK) return st;
    }
    // Racing first callers store the same answer.
    cached_.store(value != 0 ? 1 : 0, std::memory_order_release);
    *out = value != 0;
    return TF_OK;
}

tf_status DevicePool::create_pool(const DriverApi &api) {
    CUmemPoolProps props;
    std::memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = device_;
    props.maxSize = static_cast<size_t>(settings_.reserved_limit);
    CUmemoryPool pool = nullptr;
    tf_status st = TF_CU(api, cuMemPoolCreate, &pool, &props);
    if (st != TF_OK) return st;
    cuuint64_t threshold = settings_.release_threshold;
    st = TF_CU(api, cuMemPoolSetAttribute, pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
    if (st != TF_OK) {
        CUresult r = api.cuMemPoolDestroy(pool);
        (void)r;  // an empty pool: nothing to leak but its handle
        return st;
    }
    pool_.store(pool, std::memory_order_release);
    return TF_OK;
}

tf_status DevicePool::pool_handle(const DriverApi &api, CUmemoryPool *out) {
    CUmemoryPool p = pool_.load(std::memory_order_acquire);
    if (!p) {
        std::lock_guard<std::mutex> hold(create_mutex_);
        if (!pool_.load(std::memory_order_relaxed)) {
            tf_status st = create_pool(api);
            if (st != TF_OK) return st;
        }
        p = pool_.load(std::memory_order_relaxed);
    }
    *out = p;
    return TF_OK;
}

CUresult DevicePool::allocate_once(const DriverApi &api, CUstream stream, size_t bytes, bool cached,
                                   CUdeviceptr *p) {
    if (cached)
        return api.cuMemAllocFromPoolAsync(p, bytes, pool_.load(std::memory_order_relaxed), stream);
    // Counted first, so that concurrent allocations never pass the limit.
    const uint64_t limit = settings_.reserved_limit;
    const uint64_t before = uncached_reserved_.fetch_add(bytes, std::memory_order_relaxed);
    if (limit != 0 && (bytes > limit || before > limit - bytes)) {
        uncached_reserved_.fetch_sub(bytes, std::memory_order_relaxed);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = api.cuMemAlloc(p, bytes);
    if (r != CUDA_SUCCESS) uncached_reserved_.fetch_sub(bytes, std::memory_order_relaxed);
    return r;
}

// The hot path (the pool exists): the driver's allocation and the
// registry's update, nothing else (NOTE [device memory pool]).
tf_status DevicePool::allocate(const DriverApi &api, CUstream stream, size_t bytes, uint64_t *out) {
    CUmemoryPool pool = pool_.load(std::memory_order_acquire);
    CUdeviceptr p = 0;
    CUresult r = pool ? api.cuMemAllocFromPoolAsync(&p, bytes, pool, stream) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS) {
        tf_status st = allocate_slow(api, stream, bytes, pool != nullptr, r, &p);
        if (st != TF_OK) return st;
    }
    try {
        allocations_.add(p, bytes);
    } catch (...) {
        give_back_unregistered(api, stream, p, bytes);
        throw;  // to the guard: TF_ERROR_OUT_OF_MEMORY, nothing allocated
    }
    *out = p;
    return TF_OK;
}

// Everything but a successful allocation from an existing pool: the first
// allocation (the pool's creation), the uncached path, a failure.
tf_status DevicePool::allocate_slow(const DriverApi &api, CUstream stream, size_t bytes, bool tried,
                                    CUresult r, CUdeviceptr *p) {
    bool cached = true;
    if (!tried) {
        CUmemoryPool pool = nullptr;
        tf_status st = this->cached(api, &cached);
        if (st == TF_OK && cached) st = pool_handle(api, &pool);
        if (st != TF_OK) return st;
        if (!cached && !api.cuMemAlloc) return fail_missing("cuMemAlloc");
        r = allocate_once(api, stream, bytes, cached, p);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return retry_after_oom(api, stream, bytes, cached, p);
    return check_cuda(api, alloc_call(cached), r);
}

// The registry could not record a new allocation: it goes back at once.
void DevicePool::give_back_unregistered(const DriverApi &api, CUstream stream, CUdeviceptr p,
                                        size_t bytes) {
    const bool cached = cached_.load(std::memory_order_relaxed) == 1;
    CUresult r = cached ? api.cuMemFreeAsync(p, stream) : api.cuMemFree(p);
    if (!cached && r == CUDA_SUCCESS)
        uncached_reserved_.fetch_sub(bytes, std::memory_order_relaxed);
}

// NOTE [device memory pool]: out of memory, peers return what they cache
// and try once more (PyTorch frees its cached blocks after synchronizing;
// its cudaMallocAsync backend's empty_cache synchronizes, then trims).
tf_status DevicePool::retry_after_oom(const DriverApi &api, CUstream stream, size_t bytes,
                                      bool cached, CUdeviceptr *p) {
    tf_status st = return_cached_memory(api, cached);
    if (st != TF_OK) return st;
    allocations_.update_counters([&](MemoryCounters &c) {
        ++c.oom_retries;
        if (cached) ++c.trims;
    });
    CUresult r = allocate_once(api, stream, bytes, cached, p);
    if (r == CUDA_SUCCESS) return TF_OK;
    if (r != CUDA_ERROR_OUT_OF_MEMORY) return check_cuda(api, alloc_call(cached), r);
    allocations_.update_counters([](MemoryCounters &c) { ++c.oom_failures; });
    return fail_out_of_memory(api, bytes, cached);
}

// Frees queued on any slot of the device become visible to the pool once
// their streams are synchronized; then the pool gives every free byte
// back, and on a device that shares host memory the page-locked caches too.
tf_status DevicePool::return_cached_memory(const DriverApi &api, bool cached) {
    tf_status st = sync_device_slots(api);
    if (st == TF_OK && cached)
        st = TF_CU(api, cuMemPoolTrimTo, pool_.load(std::memory_order_relaxed), 0);
    if (st == TF_OK) st = release_host_caches(api);
    return st;
}

tf_status DevicePool::sync_device_slots(const DriverApi &api) {
    std::lock_guard<std::mutex> hold(runtimes_mutex_);
    for (RuntimeState *r : runtimes_) {
        for (int i = 0; i < r->slot_count(); ++i) {
            CUstream s = r->existing_stream(i);
            if (!s) continue;
            // A capturing slot's stream cannot be waited for without
            // breaking its capture: its gate waits for the fence recorded
            // before the capture began instead (NOTE [capture]); nothing the
            // capture holds is freed.
            tf_status st = r->gate(i).wait(api, s);
            if (st != TF_OK) return st;
        }
    }
    return TF_OK;
}

// Page-locked host memory blocks device allocations only where the device
// allocates from host memory itself (an integrated GPU).
tf_status DevicePool::release_host_caches(const DriverApi &api) {
    int integrated = integrated_.load(std::memory_order_relaxed);
    if (integrated < 0) {
        tf_status st =
            TF_CU(api, cuDeviceGetAttribute, &integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, device_);
        if (st != TF_OK) return st;
        integrated_.store(integrated, std::memory_order_relaxed);
    }
    if (!integrated) return TF_OK;
    std::lock_guard<std::mutex> hold(runtimes_mutex_);
    for (RuntimeState *r : runtimes_) {
        tf_status st = r->host_pool().trim(api);
        if (st != TF_OK) return st;
    }
    return TF_OK;
}

tf_status DevicePool::reserved_bytes(const DriverApi &api, bool cached, const MemoryCounters &c,
                                     uint64_t *current, uint64_t *peak) {
    CUmemoryPool pool = pool_.load(std::memory_order_acquire);
    if (!cached || !pool) {
        // cuMemAlloc holds what tf_alloc asked for (and nothing before the
        // pool's first allocation).
        *current = cached ? 0 : c.in_use;
        *peak = cached ? 0 : c.in_use_peak;
        return TF_OK;
    }
    cuuint64_t now = 0, high = 0;
    tf_status st =
        TF_CU(api, cuMemPoolGetAttribute, pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now);
    // Read after the current value: never below it, unless reset between.
    if (st == TF_OK)
        st = TF_CU(api, cuMemPoolGetAttribute, pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &high);
    if (st != TF_OK) return st;
    *current = now;
    *peak = std::max<uint64_t>(high, now);
    return TF_OK;
}

tf_status DevicePool::fail_out_of_memory(const DriverApi &api, size_t bytes, bool cached) {
    OutOfMemory what{alloc_call(cached),      ordinal_, cached, bytes, UINT64_MAX, 0,
                     settings_.reserved_limit};
    allocations_.with_counters([&](const MemoryCounters &c) {
        uint64_t peak = 0;
        KeepLastError keep;  // the message below is the failure
        what.in_use = c.in_use;
        if (reserved_bytes(api, cached, c, &what.reserved, &peak) != TF_OK)
            what.reserved = UINT64_MAX;
    });
    return fail_out_of_device_memory(api, what);
}

tf_status DevicePool::driver_free(const DriverApi &api, CUstream stream, bool cached, uint64_t ptr,
                                  size_t bytes) {
    CUresult r = cached ? api.cuMemFreeAsync(ptr, stream) : api.cuMemFree(ptr);
    if (r == CUDA_SUCCESS) {
        if (!cached) uncached_reserved_.fetch_sub(bytes, std::memory_order_relaxed);
        return TF_OK;
    }
    // Not the driver's any more (freed behind the library's back): gone.
    if (r == CUDA_ERROR_INVALID_VALUE) return fail_not_start(free_call(cached), ptr, r);
    // Whether it was freed is unknown: the caller leaks it, counted as live.
    allocations_.untake(bytes);
    return check_cuda(api, free_call(cached), r);
}

tf_status DevicePool::free(const DriverApi &api, const RuntimeState &caller, int slot,
                           CUstream stream, uint64_t ptr, bool *handled) {
    size_t bytes = 0;
    AllocationRegistry::Take t = allocations_.take(ptr, false, &bytes);
    if (t == AllocationRegistry::Take::recorded) {
        tf_status st = uses_.order_free(api, &caller, slot, stream, ptr);
        if (st != TF_OK) {
            *handled = true;  // nothing freed
            return st;
        }
        t = allocations_.take(ptr, true, &bytes);
    }
    *handled = t == AllocationRegistry::Take::taken;
    if (!*handled) return TF_OK;
    return driver_free(api, stream, cached_.load(std::memory_order_relaxed) == 1, ptr, bytes);
}

tf_status DevicePool::graph_pool(const DriverApi &api, CUmemoryPool *out) {
    bool cached = false;
    tf_status st = this->cached(api, &cached);
    if (st != TF_OK) return st;
    if (!cached)
        return TF_FAIL(TF_ERROR_NOT_SUPPORTED,
                       "device %d allocates without a memory pool (no memory pools, or the "
                       "driver lacks an entry point they need): tf_alloc inside a capture needs "
                       "one; allocate before tf_graph_capture_begin",
                       ordinal_);
    return pool_handle(api, out);
}

tf_status DevicePool::record_use(const RuntimeState &caller, int slot, uint64_t ptr) {
    KnownAllocation known;
    if (!allocations_.find(ptr, &known)) {
        GraphAddress graph;
        if (graph_addresses_.find(ptr, &graph))
            return fail_graph_address("ptr", ptr, "no other slot's work can use it");
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "ptr 0x%llx is not inside a live tf_alloc() allocation of device %d",
                       static_cast<unsigned long long>(ptr), ordinal_);
    }
    // Uncached, cuMemFree waits for the device: no order to keep.
    if (cached_.load(std::memory_order_relaxed) != 1) return TF_OK;
    uses_.add(known.base, &caller, slot);
    uint64_t base = 0;
    if (!allocations_.mark_recorded(ptr, &base)) uses_.forget(known.base);  // freed meanwhile
    return TF_OK;
}

tf_status DevicePool::trim(const DriverApi &api, uint64_t keep_bytes) {
    bool cached = false;
    tf_status st = this->cached(api, &cached);
    CUmemoryPool pool = pool_.load(std::memory_order_acquire);
    if (st != TF_OK || !cached || !pool) return st;  // nothing cached
    if ((st = sync_device_slots(api)) != TF_OK) return st;
    if ((st = TF_CU(api, cuMemPoolTrimTo, pool, static_cast<size_t>(keep_bytes))) != TF_OK)
        return st;
    allocations_.update_counters([](MemoryCounters &c) { ++c.trims; });
    return TF_OK;
}

tf_status DevicePool::stats(const DriverApi &api, tf_memory_pool_stats *out) {
    const bool cached = cached_.load(std::memory_order_acquire) == 1;
    tf_status st = TF_OK;
    allocations_.with_counters([&](const MemoryCounters &c) {
        out->in_use_bytes = c.in_use;
        out->in_use_peak = c.in_use_peak;
        out->allocations = c.allocations;
        out->frees = c.frees;
        out->oom_retries = c.oom_retries;
        out->oom_failures = c.oom_failures;
        out->trims = c.trims;
        st = reserved_bytes(api, cached, c, &out->reserved_bytes, &out->reserved_peak);
    });
    out->cached = cached ? 1 : 0;
    out->release_threshold = settings_.release_threshold;
    out->reserved_limit = settings_.reserved_limit;
    return st;
}

tf_status DevicePool::reset_peak(const DriverApi &api) {
    CUmemoryPool pool = pool_.load(std::memory_order_acquire);
    tf_status st = TF_OK;
    allocations_.update_counters([&](MemoryCounters &c) {
        cuuint64_t zero = 0;  // resets the watermark to the current value
        if (pool)
            st = TF_CU(api, cuMemPoolSetAttribute, pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero);
        if (st == TF_OK) c.in_use_peak = c.in_use;
    });
    return st;
}

void DevicePool::attach(RuntimeState *runtime) {
    std::lock_guard<std::mutex> hold(runtimes_mutex_);
    runtimes_.push_back(runtime);
}

void DevicePool::detach(RuntimeState *runtime) {
    uses_.forget_runtime(runtime);
    std::lock_guard<std::mutex> hold(runtimes_mutex_);
    runtimes_.erase(std::remove(runtimes_.begin(), runtimes_.end(), runtime), runtimes_.end());
}

void DevicePool::release(const DriverApi &api, bool faulted, CUcontext context) {
    if (!faulted && uses_.has_events()) {
        ContextScope scope;
        scope.quiet_when_deinitialized();
        if (scope.enter(api, context) == TF_OK) uses_.release(api);
    }
    CUmemoryPool pool = pool_.exchange(nullptr, std::memory_order_acq_rel);
    if (!pool) return;
    // Outstanding allocations keep it alive in the driver until they are
    // freed (docs/teardown.md).
    CUresult r = api.cuMemPoolDestroy(pool);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED && !faulted) {
        char what[96];
        log(TF_LOG_WARNING, "tf_runtime_release: cuMemPoolDestroy of device %d's pool failed: %s",
            ordinal_, describe_cuda(api, r, what, sizeof what));
    }
}

tf_status memory_pools_supported(const RuntimeState &state, bool *out) {
    return state.device_pool().cached(state.api(), out);
}

}  // namespace tf
