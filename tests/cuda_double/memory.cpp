// SPDX-License-Identifier: MIT OR Apache-2.0
// Device memory, pinned host memory and pointer queries (copies: copy.cpp).
//
// Device memory is backed by anonymous mappings made with MAP_NORESERVE, so
// a large allocation costs nothing until it is touched.  Device addresses are
// a separate, non-canonical range (kDeviceBase and up): a library that
// dereferences one crashes at once.  Small new allocations are filled with
// 0xCD, so code that assumes fresh device memory is zeroed shows up.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "entries.h"
#include "host_pages.h"
#include "state.h"

namespace tfd {

constexpr uint64_t kFillLimit = uint64_t(16) << 20;
constexpr unsigned char kFreshByte = 0xCD;

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

DeviceAlloc *find_alloc(uint64_t dptr, uint64_t bytes, uint64_t *base)
{
    auto &m = state().device_allocs;
    auto it = m.upper_bound(dptr);
    if (it == m.begin())
        return nullptr;
    --it;
    uint64_t offset = dptr - it->first;
    if (offset >= it->second.size || bytes > it->second.size - offset)
        return nullptr;
    if (base != nullptr)
        *base = it->first;
    return &it->second;
}

CUresult create_alloc(int device, uint64_t ctx, uint64_t bytes, CUdeviceptr *dptr)
{
    State &s = state();
    uint64_t total = s.devices[device].total_mem;
    if (bytes > total || s.device_used[device] > total - bytes)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t mapped = static_cast<size_t>(align_up(bytes, page));
    void *host = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (host == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (bytes <= kFillLimit)
        std::memset(host, kFreshByte, static_cast<size_t>(bytes));

    uint64_t base = align_up(s.next_device_addr, kDeviceAlign);
    s.next_device_addr = base + bytes + kDeviceGap;
    DeviceAlloc a;
    a.size = bytes;
    a.host = static_cast<unsigned char *>(host);
    a.mapped = mapped;
    a.device = device;
    a.ctx = ctx;
    a.serial = s.next_alloc_serial++;
    s.device_allocs[base] = a;
    s.device_used[device] += bytes;
    if (ctx != 0)
        ++s.live[TFD_DEVICE_ALLOCS];
    *dptr = base;
    return CUDA_SUCCESS;
}

void release_alloc(std::map<uint64_t, DeviceAlloc>::iterator it)
{
    State &s = state();
    DeviceAlloc &a = it->second;
    if (a.pool != 0) {
        pool_release(a, it->first);  // the block stays the pool's
    } else {
        munmap(a.host, a.mapped);
        s.device_used[a.device] -= a.size;
    }
    if (a.ctx != 0)
        --s.live[TFD_DEVICE_ALLOCS];
    s.device_allocs.erase(it);
}

// The live allocation starting at dptr whose free is not queued yet.
static std::map<uint64_t, DeviceAlloc>::iterator freeable(CUdeviceptr dptr)
{
    auto &m = state().device_allocs;
    auto it = m.find(dptr);
    return it == m.end() || it->second.free_queued ? m.end() : it;
}

unsigned char *mapped_range(CUdeviceptr dptr, size_t bytes)
{
    void *p = reinterpret_cast<void *>(static_cast<uintptr_t>(dptr));
    return page_locked(p, bytes) ? static_cast<unsigned char *>(p) : nullptr;
}

unsigned char *device_range(CUdeviceptr dptr, size_t bytes)
{
    uint64_t base = 0;
    DeviceAlloc *a = find_alloc(dptr, bytes, &base);
    if (a != nullptr)
        return a->host + (dptr - base);
    unsigned char *block = pool_block_range(dptr, bytes);
    return block != nullptr ? block : mapped_range(dptr, bytes);
}

CUresult need_stream(CUstream stream, Context **cur, uint64_t *key)
{
    CUresult rc = need_context(cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    return use_stream(stream, **cur, key);
}

static CUresult mem_alloc(CUdeviceptr *dptr, size_t bytes)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc == CUDA_SUCCESS)
        rc = refuse_unsafe_call();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (dptr == nullptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return create_alloc(cur->device, cur->handle, bytes, dptr);
}

// Synchronous, as in CUDA: every stream of the allocation's device first
// runs what is queued (work that may still use the memory), then the
// memory goes.  Anything but a live allocation's base is
// CUDA_ERROR_INVALID_VALUE, a base whose cuMemFreeAsync is queued too.
static CUresult mem_free(CUdeviceptr dptr)
{
    CUresult rc = need_context(nullptr);
    if (rc == CUDA_SUCCESS)
        rc = refuse_unsafe_call();
    if (rc != CUDA_SUCCESS || dptr == 0)
        return rc;
    auto it = freeable(dptr);
    if (it == state().device_allocs.end() || it->second.pool != 0 || it->second.graph_holders != 0)
        return CUDA_ERROR_INVALID_VALUE;  // pool memory goes with cuMemFreeAsync, a graph's
                                          // allocation with its graph (graph.h)
    drain_device(it->second.device);
    it = freeable(dptr);  // the drain ran queued frees: look again
    if (it != state().device_allocs.end())
        release_alloc(it);
    return need_context(nullptr);
}

// From the device's default pool (mem_pool.cpp; release threshold 0 unless
// someone sets it).  The memory exists from the call on: work the stream
// runs after the allocation may use it, and so may, wrongly, work on other
// streams.
static CUresult mem_alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc == CUDA_SUCCESS)
        rc = refuse_in_capture(key);  // graph memory nodes are not modelled
    if (rc != CUDA_SUCCESS)
        return rc;
    if (device_attribute(cur->device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (dptr == nullptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return pool_alloc(default_pool(cur->device), cur->handle, key, bytes, dptr);
}

// The memory goes when the stream runs the free: work queued before it still
// finds it, work that runs after it faults its context -- unless the pool
// handed the block out again meanwhile (to an allocation on the same stream,
// which the free precedes), when that work finds the new allocation's
// memory, as on a GPU.  A second free of the same base is
// CUDA_ERROR_INVALID_VALUE.  On a capturing stream, and for a graph's
// allocation, graph.h says what happens.
static CUresult mem_free_async(CUdeviceptr dptr, CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (capture_of(key) != nullptr)
        return capture_mem_free(key, dptr);
    auto it = freeable(dptr);
    if (it == state().device_allocs.end())
        return CUDA_ERROR_INVALID_VALUE;
    if (it->second.graph_holders != 0)
        return free_graph_alloc(it->second);
    it->second.free_queued = true;
    if (it->second.pool != 0)
        pool_free_queued(it->second, dptr, key);
    const uint64_t serial = it->second.serial;
    Op op;
    op.what = "cuMemFreeAsync";
    op.body = [dptr, serial](Context &) {
        auto &m = state().device_allocs;
        auto found = m.find(dptr);
        if (found != m.end() && found->second.serial == serial)
            release_alloc(found);
        return 0;
    };
    enqueue(key, cur->handle, std::move(op));
    return CUDA_SUCCESS;
}

static CUresult host_alloc(void **pp, size_t bytes, unsigned int flags)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc == CUDA_SUCCESS)
        rc = refuse_unsafe_call();
    if (rc != CUDA_SUCCESS)
        return rc;
    const unsigned known =
        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
    if (pp == nullptr || bytes == 0 || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = map_host_block(bytes);
    if (p == nullptr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    State &s = state();
    s.host_allocs[reinterpret_cast<uintptr_t>(p)] = HostAlloc{bytes, flags, cur->handle};
    ++s.live[TFD_HOST_ALLOCS];
    *pp = p;
    return CUDA_SUCCESS;
}

// Synchronous, as in CUDA: every stream first runs what is queued (copies
// that may still read or write the block), then the block goes (unmapped:
// host_pages.cpp).
static CUresult free_host(void *p)
{
    CUresult rc = need_context(nullptr);
    if (rc == CUDA_SUCCESS)
        rc = refuse_unsafe_call();
    if (rc != CUDA_SUCCESS)
        return rc;
    State &s = state();
    if (p == nullptr || s.host_allocs.count(reinterpret_cast<uintptr_t>(p)) == 0)
        return CUDA_ERROR_INVALID_VALUE;
    drain_all();
    auto it = s.host_allocs.find(reinterpret_cast<uintptr_t>(p));
    unmap_host_block(p, it->second.size);
    s.host_allocs.erase(it);
    --s.live[TFD_HOST_ALLOCS];
    return CUDA_SUCCESS;
}

// Answered from the current context, as the real driver may: an allocation
// of another device is "not found" there (callers make the owner's context
// current first; cuPointerGetAttribute answers from any context).
static CUresult address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t base = 0;
    DeviceAlloc *a = find_alloc(dptr, 1, &base);
    if (a == nullptr || a->device != cur->device)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase != nullptr)
        *pbase = base;
    if (psize != nullptr)
        *psize = static_cast<size_t>(a->size);
    return CUDA_SUCCESS;
}

static const HostAlloc *find_in(const std::map<uintptr_t, HostAlloc> &m, uintptr_t p,
                                uintptr_t *base)
{
    auto it = m.upper_bound(p);
    if (it == m.begin())
        return nullptr;
    --it;
    if (p - it->first >= it->second.size)
        return nullptr;
    *base = it->first;
    return &it->second;
}

const HostAlloc *find_host(uintptr_t p, uintptr_t *base)
{
    const HostAlloc *h = find_in(state().host_allocs, p, base);
    return h != nullptr ? h : find_in(state().host_registered, p, base);
}

// Page-locks caller memory: from then on it is page-locked for the copies
// (read and written when they run) and mapped on the device at its host
// address, like a cuMemHostAlloc block.  A range overlapping one already
// page-locked is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, as in CUDA.
static CUresult host_register(void *p, size_t bytes, unsigned int flags)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc == CUDA_SUCCESS)
        rc = refuse_unsafe_call();
    if (rc != CUDA_SUCCESS)
        return rc;
    const unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                           CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if (p == nullptr || bytes == 0 || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    for (const auto *m : {&state().host_allocs, &state().host_registered}) {
        auto it = m->lower_bound(a);
        uintptr_t base = 0;
        if ((it != m->end() && it->first < a + bytes) || find_in(*m, a, &base) != nullptr)
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    state().host_registered[a] = HostAlloc{bytes, flags, cur->handle};
    return CUDA_SUCCESS;
}

// Only the start of a registered range.  Copies still queued on it keep
// their pointers (the double runs them on plain host memory then): the
// library must wait for them first, which tests observe through the data.
static CUresult host_unregister(void *p)
{
    CUresult rc = need_context(nullptr);
    if (rc == CUDA_SUCCESS)
        rc = refuse_unsafe_call();
    if (rc != CUDA_SUCCESS)
        return rc;
    auto &m = state().host_registered;
    auto it = m.find(reinterpret_cast<uintptr_t>(p));
    if (p == nullptr || it == m.end())
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    m.erase(it);
    return CUDA_SUCCESS;
}

bool page_locked(const void *p, size_t bytes)
{
    uintptr_t base = 0;
    const HostAlloc *h = find_host(reinterpret_cast<uintptr_t>(p), &base);
    return h != nullptr && bytes <= h->size - (reinterpret_cast<uintptr_t>(p) - base);
}

// With unified addressing every cuMemHostAlloc block is mapped, at the
// same address on the device.
static CUresult host_device_pointer(CUdeviceptr *dptr, void *p, unsigned int flags)
{
    CUresult rc = need_context(nullptr);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (dptr == nullptr || flags != 0 || !page_locked(p, 1))
        return CUDA_ERROR_INVALID_VALUE;
    *dptr = reinterpret_cast<uintptr_t>(p);
    return CUDA_SUCCESS;
}

static CUresult device_pointer_attribute(void *data, int attribute, CUdeviceptr ptr, uint64_t base,
                                         const DeviceAlloc &a)
{
    switch (attribute) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *static_cast<unsigned int *>(data) = CU_MEMORYTYPE_DEVICE;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *static_cast<int *>(data) = a.device;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            *static_cast<CUcontext *>(data) = handle_ptr<CUcontext>(a.ctx);
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
            *static_cast<CUdeviceptr *>(data) = ptr;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *static_cast<CUdeviceptr *>(data) = base;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *static_cast<size_t *>(data) = static_cast<size_t>(a.size);
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<int *>(data) = 0; return CUDA_SUCCESS;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult host_pointer_attribute(void *data, int attribute, CUdeviceptr ptr,
                                       const HostAlloc &h)
{
    const Context *owner = find_context(h.ctx);
    switch (attribute) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *static_cast<unsigned int *>(data) = CU_MEMORYTYPE_HOST;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *static_cast<int *>(data) = owner != nullptr ? owner->device : 0;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            *static_cast<CUcontext *>(data) = handle_ptr<CUcontext>(h.ctx);
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER:
            *static_cast<void **>(data) = reinterpret_cast<void *>(static_cast<uintptr_t>(ptr));
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<int *>(data) = 0; return CUDA_SUCCESS;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult pointer_attribute(void *data, int attribute, CUdeviceptr ptr)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (data == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t base = 0;
    if (const DeviceAlloc *a = find_alloc(ptr, 1, &base))
        return device_pointer_attribute(data, attribute, ptr, base, *a);
    uintptr_t hbase = 0;
    if (const HostAlloc *h = find_host(static_cast<uintptr_t>(ptr), &hbase))
        return host_pointer_attribute(data, attribute, ptr, *h);
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult entry::d_cuMemAlloc(CUdeviceptr *dptr, size_t bytes)
{
    return run("cuMemAlloc", [&] { return mem_alloc(dptr, bytes); });
}

CUresult entry::d_cuMemFree(CUdeviceptr dptr)
{
    return run("cuMemFree", [&] { return mem_free(dptr); });
}

CUresult entry::d_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
    return run("cuMemAllocAsync", [&] { return mem_alloc_async(dptr, bytes, stream); });
}

CUresult entry::d_cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    return run("cuMemFreeAsync", [&] { return mem_free_async(dptr, stream); });
}

CUresult entry::d_cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags)
{
    return run("cuMemHostAlloc", [&] { return host_alloc(pp, bytes, flags); });
}

CUresult entry::d_cuMemFreeHost(void *p)
{
    return run("cuMemFreeHost", [&] { return free_host(p); });
}

CUresult entry::d_cuMemHostRegister(void *p, size_t bytes, unsigned int flags)
{
    return run("cuMemHostRegister", [&] { return host_register(p, bytes, flags); });
}

CUresult entry::d_cuMemHostUnregister(void *p)
{
    return run("cuMemHostUnregister", [&] { return host_unregister(p); });
}

CUresult entry::d_cuMemHostGetDevicePointer(CUdeviceptr *dptr, void *p, unsigned int flags)
{
    return run("cuMemHostGetDevicePointer", [&] { return host_device_pointer(dptr, p, flags); });
}

CUresult entry::d_cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    return run("cuMemGetAddressRange", [&] { return address_range(pbase, psize, dptr); });
}

CUresult entry::d_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    return run("cuPointerGetAttribute",
               [&] { return pointer_attribute(data, raw_enum(attribute), ptr); });
}

}  // namespace tfd
