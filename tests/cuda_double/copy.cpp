// SPDX-License-Identifier: MIT OR Apache-2.0
// Copies and memsets: validated when called, done when their stream runs
// them (queue.h), with the real driver's rules for host memory:
//  * pageable host memory (anything but a cuMemHostAlloc block): an
//    HtoD copy stages the source at the call, so the caller may reuse it at
//    once; a DtoH copy returns only once the copy is done (the stream runs
//    up to and including it);
//  * page-locked host memory is read or written when the copy runs: reusing
//    it before the stream got there shows.
// The synchronous copies run on the context's legacy default stream and
// return once it has run them.  Device ranges are looked up again when the
// op runs; memory freed in between faults the context
// (CUDA_ERROR_ILLEGAL_ADDRESS).
#include <cstring>
#include <memory>
#include <vector>

#include "entries.h"
#include "state.h"

namespace tfd {

// A host pointer handed to a copy must be a canonical x86-64 address; a
// device address passed by mistake is reported instead of crashing here.
static bool host_pointer_ok(const void *p)
{
    uintptr_t top = reinterpret_cast<uintptr_t>(p) >> 47;
    return p != nullptr && (top == 0 || top == (uintptr_t(1) << 17) - 1);
}

// Writes n bytes at dst (device memory's backing store, or host memory).
// Page-locked host memory may be read by host code spinning on it while the
// background thread runs this op: it is written with atomic release stores
// (plain stores on x86), so that a reader using atomic loads sees no data
// race, and a later op's store (a flag) publishes this one's.
static void store(unsigned char *dst, const void *src, size_t n)
{
    const unsigned char *s = static_cast<const unsigned char *>(src);
    if (!page_locked(dst, n)) {
        std::memmove(dst, s, n);
        return;
    }
    std::vector<unsigned char> copy;
    if (s < dst + n && dst < s + n) {  // overlapping: copy first
        copy.assign(s, s + n);
        s = copy.data();
    }
    size_t i = 0;
    for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % 8 != 0; ++i)
        __atomic_store_n(dst + i, s[i], __ATOMIC_RELEASE);
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, s + i, 8);
        __atomic_store_n(reinterpret_cast<uint64_t *>(dst + i), w, __ATOMIC_RELEASE);
    }
    for (; i < n; ++i)
        __atomic_store_n(dst + i, s[i], __ATOMIC_RELEASE);
}

static int write_device(CUdeviceptr dst, const void *src, size_t bytes)
{
    unsigned char *d = device_range(dst, bytes);
    if (d == nullptr)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    store(d, src, bytes);
    return 0;
}

// The op of an HtoD copy; a pageable source is staged now.
static Op htod_op(const char *what, CUdeviceptr dst, const void *src, size_t bytes, bool stage)
{
    Op op;
    op.what = what;
    if (!stage) {
        op.body = [dst, src, bytes](Context &) { return write_device(dst, src, bytes); };
        return op;
    }
    const unsigned char *from = static_cast<const unsigned char *>(src);
    auto staged = std::make_shared<std::vector<unsigned char>>(from, from + bytes);
    op.body = [dst, staged](Context &) {
        return write_device(dst, staged->data(), staged->size());
    };
    return op;
}

static Op dtoh_op(const char *what, void *dst, CUdeviceptr src, size_t bytes)
{
    Op op;
    op.what = what;
    op.body = [dst, src, bytes](Context &) {
        const unsigned char *s = device_range(src, bytes);
        if (s == nullptr)
            return int(CUDA_ERROR_ILLEGAL_ADDRESS);
        store(static_cast<unsigned char *>(dst), s, bytes);
        return 0;
    };
    return op;
}

static Op dtod_op(const char *what, CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    Op op;
    op.what = what;
    op.body = [dst, src, bytes](Context &) {
        unsigned char *d = device_range(dst, bytes);
        const unsigned char *s = device_range(src, bytes);
        if (d == nullptr || s == nullptr)
            return int(CUDA_ERROR_ILLEGAL_ADDRESS);
        store(d, s, bytes);
        return 0;
    };
    return op;
}

// Queue `op` on `key` and, when `wait` is set, run the stream up to it; a
// fault the run raised is the call's result.
static CUresult submit(uint64_t key, const Context &cur, Op op, bool wait)
{
    uint64_t seq = enqueue(key, cur.handle, std::move(op));
    if (!wait)
        return CUDA_SUCCESS;
    advance(key, seq);
    return need_context(nullptr);
}

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS || bytes == 0)
        return rc;
    if (device_range(dst, bytes) == nullptr || !host_pointer_ok(src))
        return CUDA_ERROR_INVALID_VALUE;
    bool stage = !page_locked(src, bytes);
    return submit(key, *cur, htod_op("cuMemcpyHtoDAsync", dst, src, bytes, stage), false);
}

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS || bytes == 0)
        return rc;
    if (device_range(src, bytes) == nullptr || !host_pointer_ok(dst))
        return CUDA_ERROR_INVALID_VALUE;
    bool wait = !page_locked(dst, bytes);
    // Into pageable memory the copy must finish before the call returns,
    // which a capturing stream cannot do (graph.h).
    if (wait && (rc = refuse_in_capture(key)) != CUDA_SUCCESS)
        return rc;
    return submit(key, *cur, dtoh_op("cuMemcpyDtoHAsync", dst, src, bytes), wait);
}

static CUresult copy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS || bytes == 0)
        return rc;
    if (device_range(dst, bytes) == nullptr || device_range(src, bytes) == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    return submit(key, *cur, dtod_op("cuMemcpyDtoDAsync", dst, src, bytes), false);
}

// The synchronous copies: the legacy default stream, then wait for it.
// Host memory is used in place (the call returns after the copy).
static CUresult copy_sync(const char *what, CUdeviceptr dst_dev, void *dst_host,
                          CUdeviceptr src_dev, const void *src_host, size_t bytes)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc == CUDA_SUCCESS)
        rc = refuse_unsafe_call();
    if (rc != CUDA_SUCCESS || bytes == 0)
        return rc;
    bool ok =
        (dst_host != nullptr ? host_pointer_ok(dst_host)
                             : device_range(dst_dev, bytes) != nullptr) &&
        (src_host != nullptr ? host_pointer_ok(src_host) : device_range(src_dev, bytes) != nullptr);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    Op op = src_host != nullptr   ? htod_op(what, dst_dev, src_host, bytes, false)
            : dst_host != nullptr ? dtoh_op(what, dst_host, src_dev, bytes)
                                  : dtod_op(what, dst_dev, src_dev, bytes);
    return submit(legacy_key(cur->handle), *cur, std::move(op), true);
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

static unsigned char *peer_range(CUdeviceptr p, size_t bytes, uint64_t ctx)
{
    const Context *c = find_context(ctx);
    uint64_t base = 0;
    DeviceAlloc *a = c == nullptr ? nullptr : find_alloc(p, bytes, &base);
    if (a == nullptr || a->device != c->device)
        return nullptr;
    return a->host + (p - base);
}

static CUresult copy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                          size_t bytes, CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    const Context *dc = nullptr;
    const Context *sc = nullptr;
    if ((rc = peer_context(dst_ctx, &dc)) != CUDA_SUCCESS ||
        (rc = peer_context(src_ctx, &sc)) != CUDA_SUCCESS)
        return rc;
    if (bytes == 0)
        return CUDA_SUCCESS;
    uint64_t dh = dc->handle, sh = sc->handle;
    if (peer_range(dst, bytes, dh) == nullptr || peer_range(src, bytes, sh) == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    Op op;
    op.what = "cuMemcpyPeerAsync";
    op.body = [dst, dh, src, sh, bytes](Context &) {
        unsigned char *d = peer_range(dst, bytes, dh);
        const unsigned char *s = peer_range(src, bytes, sh);
        if (d == nullptr || s == nullptr)
            return int(CUDA_ERROR_ILLEGAL_ADDRESS);
        store(d, s, bytes);
        return 0;
    };
    return submit(key, *cur, std::move(op), false);
}

// cuMemsetD8Async / cuMemsetD32Async: `count` elements of `width` bytes.
template <class T>
static CUresult memset_async(const char *what, CUdeviceptr dst, T value, size_t count,
                             CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS || count == 0)
        return rc;
    if (count > SIZE_MAX / sizeof(T) || device_range(dst, count * sizeof(T)) == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (dst % sizeof(T) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    Op op;
    op.what = what;
    op.body = [dst, value, count](Context &) {
        unsigned char *d = device_range(dst, count * sizeof(T));
        if (d == nullptr)
            return int(CUDA_ERROR_ILLEGAL_ADDRESS);
        if (page_locked(d, count * sizeof(T))) {
            std::vector<T> values(count, value);
            store(d, values.data(), count * sizeof(T));
        } else {
            for (size_t i = 0; i < count; ++i)
                std::memcpy(d + i * sizeof(T), &value, sizeof(T));
        }
        return 0;
    };
    return submit(key, *cur, std::move(op), false);
}

// cuStreamWriteValue32: a 4-byte store into device memory or mapped
// page-locked memory when the stream runs it.  The store is a release store,
// so a host reading the word with an acquire load also sees what earlier ops
// of the stream wrote (CUDA's default flag: a memory barrier first).  A
// device whose CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS(_V1) is set to 0
// refuses it, as a platform with stream memory operations off does.
static CUresult write_value32(CUstream stream, CUdeviceptr addr, uint32_t value, unsigned flags)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (device_attribute(cur->device, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((flags & ~unsigned(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)) != 0 || addr % 4 != 0 ||
        device_range(addr, 4) == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    Op op;
    op.what = "cuStreamWriteValue32";
    op.body = [addr, value](Context &) {
        unsigned char *d = device_range(addr, 4);
        if (d == nullptr)
            return int(CUDA_ERROR_ILLEGAL_ADDRESS);
        __atomic_store_n(reinterpret_cast<uint32_t *>(d), value, __ATOMIC_RELEASE);
        return 0;
    };
    return submit(key, *cur, std::move(op), false);
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

CUresult entry::d_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes)
{
    return run("cuMemcpyHtoD",
               [&] { return copy_sync("cuMemcpyHtoD", dst, nullptr, 0, src, bytes); });
}

CUresult entry::d_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes)
{
    return run("cuMemcpyDtoH",
               [&] { return copy_sync("cuMemcpyDtoH", 0, dst, src, nullptr, bytes); });
}

CUresult entry::d_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    return run("cuMemcpyDtoD",
               [&] { return copy_sync("cuMemcpyDtoD", dst, nullptr, src, nullptr, bytes); });
}

CUresult entry::d_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                    CUcontext src_ctx, size_t bytes, CUstream stream)
{
    return run("cuMemcpyPeerAsync",
               [&] { return copy_peer(dst, dst_ctx, src, src_ctx, bytes, stream); });
}

CUresult entry::d_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count,
                                  CUstream stream)
{
    return run("cuMemsetD8Async", [&] {
        return memset_async<unsigned char>("cuMemsetD8Async", dst, value, count, stream);
    });
}

CUresult entry::d_cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                                   CUstream stream)
{
    return run("cuMemsetD32Async", [&] {
        return memset_async<uint32_t>("cuMemsetD32Async", dst, value, count, stream);
    });
}

CUresult entry::d_cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                       unsigned int flags)
{
    return run("cuStreamWriteValue32", [&] { return write_value32(stream, addr, value, flags); });
}

}  // namespace tfd
