// Device memory, pinned host memory, copies and pointer queries.
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
#include "state.h"

namespace tfd {

constexpr uint64_t kFillLimit = uint64_t(16) << 20;
constexpr unsigned char kFreshByte = 0xCD;

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

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
    munmap(a.host, a.mapped);
    s.device_used[a.device] -= a.size;
    if (a.ctx != 0)
        --s.live[TFD_DEVICE_ALLOCS];
    s.device_allocs.erase(it);
}

// Free by base address; anything else is CUDA_ERROR_INVALID_VALUE.
static CUresult free_base(CUdeviceptr dptr)
{
    auto &m = state().device_allocs;
    auto it = m.find(dptr);
    if (it == m.end())
        return CUDA_ERROR_INVALID_VALUE;
    release_alloc(it);
    return CUDA_SUCCESS;
}

// A host pointer handed to a copy must be a canonical x86-64 address; a
// device address passed by mistake is reported instead of crashing here.
static bool host_pointer_ok(const void *p)
{
    uintptr_t top = reinterpret_cast<uintptr_t>(p) >> 47;
    return p != nullptr && (top == 0 || top == (uintptr_t(1) << 17) - 1);
}

// Host view of a device range that must lie in one live allocation.
static unsigned char *device_range(CUdeviceptr dptr, size_t bytes)
{
    uint64_t base = 0;
    DeviceAlloc *a = find_alloc(dptr, bytes, &base);
    return a == nullptr ? nullptr : a->host + (dptr - base);
}

// Prologue of every stream-ordered memory call.
static CUresult need_stream(CUstream stream, Context **cur)
{
    CUresult rc = need_context(cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    return use_stream(stream, **cur, nullptr);
}

static CUresult mem_alloc(CUdeviceptr *dptr, size_t bytes)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (dptr == nullptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return create_alloc(cur->device, cur->handle, bytes, dptr);
}

static CUresult mem_free(CUdeviceptr dptr)
{
    CUresult rc = need_context(nullptr);
    if (rc != CUDA_SUCCESS)
        return rc;
    return dptr == 0 ? CUDA_SUCCESS : free_base(dptr);
}

static CUresult mem_alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    CUresult rc = need_stream(stream, &cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (device_attribute(cur->device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (dptr == nullptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return create_alloc(cur->device, cur->handle, bytes, dptr);
}

static CUresult mem_free_async(CUdeviceptr dptr, CUstream stream)
{
    Context *cur = nullptr;
    CUresult rc = need_stream(stream, &cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    return free_base(dptr);
}

static CUresult host_alloc(void **pp, size_t bytes, unsigned int flags)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    const unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                           CU_MEMHOSTALLOC_WRITECOMBINED;
    if (pp == nullptr || bytes == 0 || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = nullptr;
    if (posix_memalign(&p, static_cast<size_t>(sysconf(_SC_PAGESIZE)), bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    State &s = state();
    s.host_allocs[reinterpret_cast<uintptr_t>(p)] = HostAlloc{bytes, flags, cur->handle};
    ++s.live[TFD_HOST_ALLOCS];
    *pp = p;
    return CUDA_SUCCESS;
}

static CUresult free_host(void *p)
{
    CUresult rc = need_context(nullptr);
    if (rc != CUDA_SUCCESS)
        return rc;
    State &s = state();
    auto it = s.host_allocs.find(reinterpret_cast<uintptr_t>(p));
    if (p == nullptr || it == s.host_allocs.end())
        return CUDA_ERROR_INVALID_VALUE;
    std::free(p);
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

// Pinned host allocation containing `p`, or nullptr.
static const HostAlloc *find_host(uintptr_t p, uintptr_t *base)
{
    auto &m = state().host_allocs;
    auto it = m.upper_bound(p);
    if (it == m.begin())
        return nullptr;
    --it;
    if (p - it->first >= it->second.size)
        return nullptr;
    *base = it->first;
    return &it->second;
}

static CUresult device_pointer_attribute(void *data, int attribute, CUdeviceptr ptr,
                                         uint64_t base, const DeviceAlloc &a)
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
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<int *>(data) = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
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
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<int *>(data) = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
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

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    CUresult rc = need_stream(stream, &cur);
    if (rc != CUDA_SUCCESS || bytes == 0)
        return rc;
    unsigned char *d = device_range(dst, bytes);
    if (d == nullptr || !host_pointer_ok(src))
        return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(d, src, bytes);
    return CUDA_SUCCESS;
}

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    CUresult rc = need_stream(stream, &cur);
    if (rc != CUDA_SUCCESS || bytes == 0)
        return rc;
    unsigned char *s = device_range(src, bytes);
    if (s == nullptr || !host_pointer_ok(dst))
        return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(dst, s, bytes);
    return CUDA_SUCCESS;
}

static CUresult copy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    CUresult rc = need_stream(stream, &cur);
    if (rc != CUDA_SUCCESS || bytes == 0)
        return rc;
    unsigned char *d = device_range(dst, bytes);
    unsigned char *s = device_range(src, bytes);
    if (d == nullptr || s == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    std::memmove(d, s, bytes);
    return CUDA_SUCCESS;
}

// A peer copy names both contexts; each range must lie in an allocation on
// its context's device.
static CUresult peer_context(CUcontext ctx, const Context **out)
{
    const Context *c = find_context(handle_of(ctx));
    if (c == nullptr || !c->active())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (c->poison != 0)
        return static_cast<CUresult>(c->poison);
    *out = c;
    return CUDA_SUCCESS;
}

static unsigned char *peer_range(CUdeviceptr p, size_t bytes, const Context &ctx)
{
    uint64_t base = 0;
    DeviceAlloc *a = find_alloc(p, bytes, &base);
    if (a == nullptr || a->device != ctx.device)
        return nullptr;
    return a->host + (p - base);
}

static CUresult copy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                          CUcontext src_ctx, size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    CUresult rc = need_stream(stream, &cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    const Context *dc = nullptr;
    const Context *sc = nullptr;
    if ((rc = peer_context(dst_ctx, &dc)) != CUDA_SUCCESS ||
        (rc = peer_context(src_ctx, &sc)) != CUDA_SUCCESS)
        return rc;
    if (bytes == 0)
        return CUDA_SUCCESS;
    unsigned char *d = peer_range(dst, bytes, *dc);
    unsigned char *s = peer_range(src, bytes, *sc);
    if (d == nullptr || s == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    std::memmove(d, s, bytes);
    return CUDA_SUCCESS;
}

static CUresult memset_d8(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream)
{
    Context *cur = nullptr;
    CUresult rc = need_stream(stream, &cur);
    if (rc != CUDA_SUCCESS || count == 0)
        return rc;
    unsigned char *d = device_range(dst, count);
    if (d == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    std::memset(d, value, count);
    return CUDA_SUCCESS;
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

CUresult entry::d_cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    return run("cuMemGetAddressRange", [&] { return address_range(pbase, psize, dptr); });
}

CUresult entry::d_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    return run("cuPointerGetAttribute",
               [&] { return pointer_attribute(data, raw_enum(attribute), ptr); });
}

CUresult entry::d_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)
{
    return run("cuMemcpyHtoDAsync", [&] { return copy_htod(dst, src, bytes, stream); });
}

CUresult entry::d_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    return run("cuMemcpyDtoHAsync", [&] { return copy_dtoh(dst, src, bytes, stream); });
}

CUresult entry::d_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    return run("cuMemcpyDtoDAsync", [&] { return copy_dtod(dst, src, bytes, stream); });
}

CUresult entry::d_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                   CUcontext src_ctx, size_t bytes, CUstream stream)
{
    return run("cuMemcpyPeerAsync",
               [&] { return copy_peer(dst, dst_ctx, src, src_ctx, bytes, stream); });
}

CUresult entry::d_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream)
{
    return run("cuMemsetD8Async", [&] { return memset_d8(dst, value, count, stream); });
}

}  // namespace tfd
