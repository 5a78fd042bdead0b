// SPDX-License-Identifier: MIT OR Apache-2.0
// Memory pools of the driver double: the device's default pool (behind
// cuMemAllocAsync) and pools made with cuMemPoolCreate, their attributes,
// cuMemAllocFromPoolAsync, cuMemPoolTrimTo, cuMemPoolDestroy, cuMemGetInfo.
//
// What the real driver does, as far as a library can see it:
//  * a pool reserves device memory in blocks (here: one block per
//    allocation, 512-byte multiples) and keeps a block reserved after its
//    allocation is freed, for the next allocation that fits;
//  * a block freed with cuMemFreeAsync is free once the stream ran the free;
//    before that only an allocation on the same stream may take it (stream
//    order puts the free first), so work of another stream that still uses
//    the old allocation then finds the new one's memory, as on a GPU;
//  * a reserved block stays mapped: work that runs after the free (or
//    after the block went to another allocation) reads and writes it, and
//    faults only once the block went back to the device;
//  * a synchronizing call (cuStreamSynchronize, cuEventSynchronize,
//    cuCtxSynchronize) lets every pool of the device give free blocks back
//    until it holds at most its release threshold (default 0: all of them,
//    which is why the default pool maps memory again after every sync);
//    cuMemPoolTrimTo does the same down to its argument;
//  * maxSize (CUmemPoolProps, CUDA 12.2 on) caps the reserved bytes: an
//    allocation that would need more is CUDA_ERROR_OUT_OF_MEMORY, as is one
//    beyond the device's total memory (tfd_set_total_mem) counted over every
//    pool's reservations and every cuMemAlloc;
//  * cuMemPoolDestroy returns at once; a pool with allocations outstanding
//    goes when the last of them is freed (or its context is destroyed);
//  * the default pool cannot be destroyed;
//  * on a capturing stream cuMemAllocFromPoolAsync makes an allocation node
//    instead (graph.h): the memory is the graph's, not the pool's.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "entries.h"
#include "state.h"

namespace tfd {

constexpr uint64_t kPoolAlign = 512;
constexpr uint64_t kFreshFillLimit = uint64_t(16) << 20;
constexpr unsigned char kFreshPoolByte = 0xCD;
// A free block is reused for a request when it wastes at most this much, or
// at most half of it: no block serves requests far smaller than it.
constexpr uint64_t kReuseSlack = uint64_t(64) << 10;

static uint64_t round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static MemPool *find_pool(uint64_t handle)
{
    auto it = state().pools.find(handle);
    return it == state().pools.end() || it->second.destroyed ? nullptr : &it->second;
}

uint64_t default_pool(int device)
{
    State &s = state();
    if (s.default_pool[device] == 0) {
        uint64_t h = make_handle(Tag::mem_pool);
        MemPool p;
        p.device = device;
        p.is_default = true;
        s.pools[h] = p;
        s.default_pool[device] = h;
    }
    return s.default_pool[device];
}

static void give_back(MemPool &p, std::map<uint64_t, PoolBlock>::iterator it)
{
    munmap(it->second.host, static_cast<size_t>(it->second.capacity));
    p.reserved -= it->second.capacity;
    state().device_used[p.device] -= it->second.capacity;
    p.blocks.erase(it);
}

// Free blocks go back, largest first, while the pool holds more than `keep`.
static void release_down_to(MemPool &p, uint64_t keep)
{
    while (p.reserved > keep) {
        auto victim = p.blocks.end();
        for (auto it = p.blocks.begin(); it != p.blocks.end(); ++it)
            if (it->second.owner == 0 &&
                (victim == p.blocks.end() || it->second.capacity > victim->second.capacity))
                victim = it;
        if (victim == p.blocks.end())
            return;
        give_back(p, victim);
    }
}

// A destroyed pool goes with its last block.
static void forget_if_done(uint64_t handle)
{
    State &s = state();
    auto it = s.pools.find(handle);
    if (it == s.pools.end() || !it->second.destroyed || !it->second.blocks.empty())
        return;
    s.pools.erase(it);
    --s.live[TFD_MEM_POOLS];
}

static bool fits(const PoolBlock &b, uint64_t need)
{
    return b.capacity >= need && (b.capacity - need <= kReuseSlack || b.capacity <= 2 * need);
}

// The smallest block that fits and is free, or freed on stream `key`.
static std::map<uint64_t, PoolBlock>::iterator reusable(MemPool &p, uint64_t key, uint64_t need)
{
    auto best = p.blocks.end();
    for (auto it = p.blocks.begin(); it != p.blocks.end(); ++it) {
        const PoolBlock &b = it->second;
        if ((b.owner != 0 && b.freed_on != key) || !fits(b, need))
            continue;
        if (best == p.blocks.end() || b.capacity < best->second.capacity)
            best = it;
    }
    return best;
}

static CUresult reserve(MemPool &p, uint64_t need, std::map<uint64_t, PoolBlock>::iterator *out)
{
    State &s = state();
    if (p.max_size != 0 && (need > p.max_size || p.reserved > p.max_size - need))
        return CUDA_ERROR_OUT_OF_MEMORY;
    const uint64_t total = s.devices[p.device].total_mem;
    if (need > total || s.device_used[p.device] > total - need)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *host = mmap(nullptr, static_cast<size_t>(need), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (host == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (need <= kFreshFillLimit)
        std::memset(host, kFreshPoolByte, static_cast<size_t>(need));
    const uint64_t base = round_up(s.next_device_addr, kDeviceAlign);
    s.next_device_addr = base + need + kDeviceGap;
    PoolBlock b;
    b.capacity = need;
    b.host = static_cast<unsigned char *>(host);
    *out = p.blocks.emplace(base, b).first;
    p.reserved += need;
    p.reserved_high = std::max(p.reserved_high, p.reserved);
    s.device_used[p.device] += need;
    return CUDA_SUCCESS;
}

CUresult pool_alloc(uint64_t handle, uint64_t ctx, uint64_t key, uint64_t bytes, CUdeviceptr *dptr)
{
    State &s = state();
    MemPool &p = s.pools.at(handle);
    const uint64_t need = round_up(bytes, kPoolAlign);
    auto block = reusable(p, key, need);
    if (block != p.blocks.end() && block->second.owner != 0) {
        // Freed on this stream and not run yet: the free comes first in
        // stream order, so the old allocation ends here.
        auto old = s.device_allocs.find(block->first);
        if (old != s.device_allocs.end()) {
            if (old->second.ctx != 0)
                --s.live[TFD_DEVICE_ALLOCS];
            s.device_allocs.erase(old);
        }
        p.used -= block->second.capacity;
    } else if (block == p.blocks.end()) {
        CUresult rc = reserve(p, need, &block);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    DeviceAlloc a;
    a.size = bytes;
    a.host = block->second.host;
    a.device = p.device;
    a.ctx = ctx;
    a.pool = handle;
    a.serial = s.next_alloc_serial++;
    block->second.owner = a.serial;
    block->second.freed_on = 0;
    p.used += block->second.capacity;
    p.used_high = std::max(p.used_high, p.used);
    ++p.allocations;
    s.device_allocs[block->first] = a;
    if (ctx != 0)
        ++s.live[TFD_DEVICE_ALLOCS];
    *dptr = block->first;
    return CUDA_SUCCESS;
}

void pool_free_queued(const DeviceAlloc &a, uint64_t base, uint64_t key)
{
    MemPool &p = state().pools.at(a.pool);
    auto it = p.blocks.find(base);
    if (it != p.blocks.end() && it->second.owner == a.serial)
        it->second.freed_on = key;
}

void pool_release(const DeviceAlloc &a, uint64_t base)
{
    MemPool &p = state().pools.at(a.pool);
    auto it = p.blocks.find(base);
    if (it == p.blocks.end() || it->second.owner != a.serial)
        return;
    it->second.owner = 0;
    it->second.freed_on = 0;
    p.used -= it->second.capacity;
    if (p.destroyed) {
        give_back(p, it);
        forget_if_done(a.pool);
    }
}

unsigned char *pool_block_range(uint64_t dptr, uint64_t bytes)
{
    for (auto &entry : state().pools) {
        auto &blocks = entry.second.blocks;
        auto it = blocks.upper_bound(dptr);
        if (it == blocks.begin())
            continue;
        --it;
        const uint64_t offset = dptr - it->first;
        if (offset < it->second.capacity && bytes <= it->second.capacity - offset)
            return it->second.host + offset;
    }
    return nullptr;
}

void pools_after_sync(int device)
{
    for (auto &entry : state().pools)
        if (entry.second.device == device && !entry.second.destroyed)
            release_down_to(entry.second, entry.second.threshold);
}

void pools_reset_counters()
{
    for (auto &entry : state().pools)
        entry.second.attribute_sets = entry.second.allocations = entry.second.trims = 0;
}

// ---- entry points -------------------------------------------------------

static bool all_zero(const unsigned char *p, size_t n)
{
    return std::all_of(p, p + n, [](unsigned char c) { return c == 0; });
}

static CUresult pool_create(CUmemoryPool *out, const CUmemPoolProps *props)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (out == nullptr || props == nullptr || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->win32SecurityAttributes ||
        props->usage != 0 || !all_zero(props->reserved, sizeof props->reserved))
        return CUDA_ERROR_INVALID_VALUE;
    // Before 12.2 maxSize was part of the reserved bytes, which must be 0.
    if (props->maxSize != 0 && state().driver_version < 12020)
        return CUDA_ERROR_INVALID_VALUE;
    const int device = props->location.id;
    if (!valid_device(device))
        return CUDA_ERROR_INVALID_DEVICE;
    if (device_attribute(device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    State &s = state();
    uint64_t h = make_handle(Tag::mem_pool);
    MemPool p;
    p.device = device;
    p.handle_types = static_cast<int>(props->handleTypes);
    p.max_size = props->maxSize;
    s.pools[h] = p;
    ++s.live[TFD_MEM_POOLS];
    *out = handle_ptr<CUmemoryPool>(h);
    return CUDA_SUCCESS;
}

static CUresult pool_destroy(CUmemoryPool pool)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    MemPool *p = find_pool(handle_of(pool));
    if (p == nullptr || p->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    p->destroyed = true;
    release_down_to(*p, 0);
    forget_if_done(handle_of(pool));
    return CUDA_SUCCESS;
}

static CUresult set_attribute(CUmemoryPool pool, int attr, const void *value)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    MemPool *p = find_pool(handle_of(pool));
    if (p == nullptr || value == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    const uint64_t v = *static_cast<const cuuint64_t *>(value);
    switch (attr) {
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = v; break;
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: break;  // int; no effect here
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (v != 0)
                return CUDA_ERROR_INVALID_VALUE;  // only a reset to the current value
            if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
                p->reserved_high = p->reserved;
            else
                p->used_high = p->used;
            break;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
    ++p->attribute_sets;
    return CUDA_SUCCESS;
}

static CUresult get_attribute(CUmemoryPool pool, int attr, void *value)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    const MemPool *p = find_pool(handle_of(pool));
    if (p == nullptr || value == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t v = 0;
    switch (attr) {
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *static_cast<int *>(value) = 1;
            return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v = p->used_high; break;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
    *static_cast<cuuint64_t *>(value) = v;
    return CUDA_SUCCESS;
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    const MemPool *p = find_pool(handle_of(pool));
    if (dptr == nullptr || bytes == 0 || p == nullptr || p->device != cur->device)
        return CUDA_ERROR_INVALID_VALUE;
    if (capture_of(key) != nullptr)
        return capture_mem_alloc(key, p->device, bytes, dptr);  // the graph's (graph.h)
    return pool_alloc(handle_of(pool), cur->handle, key, bytes, dptr);
}

static CUresult trim_to(CUmemoryPool pool, size_t keep)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    MemPool *p = find_pool(handle_of(pool));
    if (p == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    ++p->trims;
    release_down_to(*p, keep);
    return CUDA_SUCCESS;
}

static CUresult mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (free_bytes == nullptr || total_bytes == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    const uint64_t total = state().devices[cur->device].total_mem;
    const uint64_t used = state().device_used[cur->device];
    *total_bytes = static_cast<size_t>(total);
    *free_bytes = static_cast<size_t>(used < total ? total - used : 0);
    return CUDA_SUCCESS;
}

static CUresult get_default_pool(CUmemoryPool *out, CUdevice dev)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (out == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (device_attribute(dev, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    *out = handle_ptr<CUmemoryPool>(default_pool(dev));
    return CUDA_SUCCESS;
}

CUresult entry::d_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    return run("cuMemPoolCreate", [&] { return pool_create(pool, props); });
}

CUresult entry::d_cuMemPoolDestroy(CUmemoryPool pool)
{
    return run("cuMemPoolDestroy", [&] { return pool_destroy(pool); });
}

CUresult entry::d_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    return run("cuMemPoolSetAttribute", [&] { return set_attribute(pool, raw_enum(attr), value); });
}

CUresult entry::d_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    return run("cuMemPoolGetAttribute", [&] { return get_attribute(pool, raw_enum(attr), value); });
}

CUresult entry::d_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                          CUstream stream)
{
    return run("cuMemAllocFromPoolAsync",
               [&] { return alloc_from_pool(dptr, bytes, pool, stream); });
}

CUresult entry::d_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    return run("cuMemPoolTrimTo", [&] { return trim_to(pool, keep); });
}

CUresult entry::d_cuMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    return run("cuMemGetInfo", [&] { return mem_get_info(free_bytes, total_bytes); });
}

CUresult entry::d_cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return run("cuDeviceGetDefaultMemPool", [&] { return get_default_pool(pool, dev); });
}

}  // namespace tfd

// ---- control interface (tfd_control.h) ------------------------------------

using namespace tfd;

extern "C" int tfd_mem_pool_info(void *pool, struct tfd_mem_pool_info *out)
{
    Lock l(state().mu);
    auto it = state().pools.find(handle_of(pool));
    if (it == state().pools.end() || out == nullptr)
        return -1;
    const MemPool &p = it->second;
    out->device = p.device;
    out->is_default = p.is_default ? 1 : 0;
    out->destroyed = p.destroyed ? 1 : 0;
    out->handle_types = p.handle_types;
    out->release_threshold = p.threshold;
    out->max_size = p.max_size;
    out->reserved = p.reserved;
    out->reserved_high = p.reserved_high;
    out->used = p.used;
    out->used_high = p.used_high;
    out->attribute_sets = p.attribute_sets;
    out->allocations = p.allocations;
    out->trims = p.trims;
    out->blocks = p.blocks.size();
    return 0;
}

extern "C" void *tfd_default_mem_pool(int device)
{
    Lock l(state().mu);
    if (device < 0 || device >= kMaxDevices)
        return nullptr;
    return handle_ptr<void *>(default_pool(device));
}

extern "C" size_t tfd_mem_pools(void **pools, size_t cap)
{
    Lock l(state().mu);
    size_t n = 0;
    for (const auto &entry : state().pools) {
        if (entry.second.is_default)
            continue;
        if (pools != nullptr && n < cap)
            pools[n] = handle_ptr<void *>(entry.first);
        ++n;
    }
    return n;
}
