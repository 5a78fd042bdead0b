/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Counting driver shim for the soak (tests/soak/soak.cpp).
 *
 * The library loads it instead of libcuda.so.1 when TENFERRO_GPU_CUDA_DRIVER
 * names its absolute path.  It exports only cuGetProcAddress_v2, the one
 * symbol the library takes from a driver by dlsym; that forwards to the
 * libcuda.so.1 the loader finds (the real driver, or the driver double) and
 * hands back counting wrappers for the entry points that create and destroy
 * streams, events, page-locked host memory and device memory.  Every other
 * entry point is the driver's own.  Only successful calls are counted, so
 * tfcd_live() is what the library holds through this driver right now (a
 * program's own calls of the real driver are not seen).
 *
 * The soak reads the counters with dlsym(shim, "tfcd_live"). */
#define _GNU_SOURCE
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* Kinds of tfcd_live, in this order. */
enum { K_STREAMS, K_EVENTS, K_HOST_ALLOCS, K_DEVICE_ALLOCS, K_KINDS };

static atomic_long g_live[K_KINDS];
static PFN_cuGetProcAddress_v12000 g_real_gpa;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The real entry points, as the driver answered them. */
static PFN_cuStreamCreate_v2000 real_stream_create;
static PFN_cuStreamDestroy_v4000 real_stream_destroy;
static PFN_cuEventCreate_v2000 real_event_create;
static PFN_cuEventDestroy_v4000 real_event_destroy;
static PFN_cuMemHostAlloc_v2020 real_host_alloc;
static PFN_cuMemFreeHost_v2000 real_free_host;
static PFN_cuMemAlloc_v3020 real_mem_alloc;
static PFN_cuMemFree_v3020 real_mem_free;
static PFN_cuMemAllocAsync_v11020 real_mem_alloc_async;
static PFN_cuMemFreeAsync_v11020 real_mem_free_async;
static PFN_cuMemAllocFromPoolAsync_v11020 real_mem_alloc_from_pool;

static CUresult counted(CUresult r, int kind, long delta) {
    if (r == CUDA_SUCCESS) atomic_fetch_add(&g_live[kind], delta);
    return r;
}

static CUresult w_stream_create(CUstream *s, unsigned flags) {
    return counted(real_stream_create(s, flags), K_STREAMS, 1);
}
static CUresult w_stream_destroy(CUstream s) {
    return counted(real_stream_destroy(s), K_STREAMS, -1);
}
static CUresult w_event_create(CUevent *e, unsigned flags) {
    return counted(real_event_create(e, flags), K_EVENTS, 1);
}
static CUresult w_event_destroy(CUevent e) { return counted(real_event_destroy(e), K_EVENTS, -1); }
static CUresult w_host_alloc(void **p, size_t bytes, unsigned flags) {
    return counted(real_host_alloc(p, bytes, flags), K_HOST_ALLOCS, 1);
}
static CUresult w_free_host(void *p) { return counted(real_free_host(p), K_HOST_ALLOCS, -1); }
static CUresult w_mem_alloc(CUdeviceptr *p, size_t bytes) {
    return counted(real_mem_alloc(p, bytes), K_DEVICE_ALLOCS, 1);
}
static CUresult w_mem_free(CUdeviceptr p) {
    /* Freeing 0 is a successful no-op of the driver, not a release. */
    return counted(real_mem_free(p), K_DEVICE_ALLOCS, p ? -1 : 0);
}
static CUresult w_mem_alloc_async(CUdeviceptr *p, size_t bytes, CUstream s) {
    return counted(real_mem_alloc_async(p, bytes, s), K_DEVICE_ALLOCS, 1);
}
static CUresult w_mem_alloc_from_pool(CUdeviceptr *p, size_t bytes, CUmemoryPool pool, CUstream s) {
    return counted(real_mem_alloc_from_pool(p, bytes, pool, s), K_DEVICE_ALLOCS, 1);
}
static CUresult w_mem_free_async(CUdeviceptr p, CUstream s) {
    return counted(real_mem_free_async(p, s), K_DEVICE_ALLOCS, p ? -1 : 0);
}

/* One wrapped entry point: where its real address goes and its wrapper.
 * cuGetProcAddress passes function pointers as void *; ISO C converts
 * between the two only through memcpy. */
typedef void (*any_fn)(void);
_Static_assert(sizeof(any_fn) == sizeof(void *), "function and object pointers differ in size");
struct wrap {
    const char *name;
    void *real_slot; /* the address of one of the real_* pointers above */
    any_fn wrapper;
};

#define WRAP(name, slot, fn) \
    { name, (void *)&slot, (any_fn)(fn) }
static const struct wrap g_wraps[] = {
    WRAP("cuStreamCreate", real_stream_create, w_stream_create),
    WRAP("cuStreamDestroy", real_stream_destroy, w_stream_destroy),
    WRAP("cuEventCreate", real_event_create, w_event_create),
    WRAP("cuEventDestroy", real_event_destroy, w_event_destroy),
    WRAP("cuMemHostAlloc", real_host_alloc, w_host_alloc),
    WRAP("cuMemFreeHost", real_free_host, w_free_host),
    WRAP("cuMemAlloc", real_mem_alloc, w_mem_alloc),
    WRAP("cuMemFree", real_mem_free, w_mem_free),
    WRAP("cuMemAllocAsync", real_mem_alloc_async, w_mem_alloc_async),
    WRAP("cuMemFreeAsync", real_mem_free_async, w_mem_free_async),
    WRAP("cuMemAllocFromPoolAsync", real_mem_alloc_from_pool, w_mem_alloc_from_pool),
};

static void load_real(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *gpa = h ? dlsym(h, "cuGetProcAddress_v2") : NULL;
    memcpy(&g_real_gpa, &gpa, sizeof gpa);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
    pthread_once(&g_once, load_real);
    if (!g_real_gpa) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = g_real_gpa(symbol, pfn, cuda_version, flags, status);
    if (r != CUDA_SUCCESS || !symbol || !pfn || !*pfn) return r;
    for (size_t i = 0; i < sizeof g_wraps / sizeof g_wraps[0]; ++i) {
        if (strcmp(symbol, g_wraps[i].name) != 0) continue;
        /* The library asks for each entry once, before any call. */
        memcpy(g_wraps[i].real_slot, pfn, sizeof *pfn);
        memcpy(pfn, &g_wraps[i].wrapper, sizeof *pfn);
        break;
    }
    return r;
}

/* What the library holds through this shim now, by kind: 0 streams,
 * 1 events, 2 page-locked host allocations, 3 device allocations; -1 for
 * an unknown kind. */
EXPORT long tfcd_live(int kind) {
    return kind >= 0 && kind < K_KINDS ? atomic_load(&g_live[kind]) : -1;
}
