/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Self-test of the CUDA driver double (tests/cuda_double).
 *
 * Uses no part of libtenferro_gpu: the driver entry points are reached the
 * way the library reaches them, through cuGetProcAddress_v2 found with
 * dlsym in the loaded libcuda.so.1, at the versions listed in
 * src/driver/driver_entries.inc.  The cuBLAS and NVRTC doubles are opened with
 * dlopen.  Every test skips when the loaded libcuda.so.1 is not the double.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <libgen.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "support/double_link.h"
#include "support/driver_table.h"

/* ---- access to the driver ------------------------------------------------ */

static const struct tfd_api *T;
static PFN_cuGetProcAddress_v12000 get_proc;

static struct driver_table D;

#define CU(call) assert_int_equal((call), CUDA_SUCCESS)
#define NEED_DOUBLE()          \
    do {                       \
        if (T == NULL) skip(); \
    } while (0)

/* Copy a dlsym / cuGetProcAddress result into a function pointer. */
#define AS_FN(var, sym) memcpy(&(var), &(sym), sizeof(sym))

static int group_setup(void **state) {
    (void)state;
    T = tfd();
    if (T == NULL) return 0;
    get_proc = driver_get_proc();
    if (get_proc == NULL || driver_table() == NULL) return -1;
    D = *driver_table();
    T->tfd_reset();
    return 0;
}

static CUcontext use_primary(int dev) {
    CUcontext c = NULL;
    CU(D.cuDevicePrimaryCtxRetain(&c, dev));
    CU(D.cuCtxSetCurrent(c));
    return c;
}

/* A companion double: beside the driver double, found through the loader. */
static void *open_companion(const char *soname) {
    void *lib = dlopen(soname, RTLD_NOW);
    assert_non_null(lib);
    return lib;
}

#define LOAD(lib, var, name)               \
    do {                                   \
        void *sym_ = dlsym((lib), (name)); \
        assert_non_null(sym_);             \
        AS_FN((var), sym_);                \
    } while (0)

/* ---- cuGetProcAddress ------------------------------------------------------ */

static void check_entry(const char *name, int version) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    assert_int_equal(get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &st), CUDA_SUCCESS);
    assert_non_null(fn);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_int_equal(T->tfd_requested_version(name), version);
}

static void test_proc_address(void **state) {
    (void)state;
    NEED_DOUBLE();
    unsigned long entries = 0;
#define TF_DRIVER_ENTRY(name, version) check_entry(#name, version), ++entries;
#include "../src/driver/driver_entries.inc"
#include "cuda_double/extra_entries.inc"
#undef TF_DRIVER_ENTRY
    assert_int_equal(T->tfd_calls("cuGetProcAddress"), entries);
    assert_int_equal(T->tfd_calls("cuGetProcAddress_v2"), entries);
    assert_int_equal(T->tfd_requested_flags("cuMemAlloc"), CU_GET_PROC_ADDRESS_DEFAULT);

    void *fn = &fn;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    /* older than the ABI the double implements */
    assert_int_equal(get_proc("cuMemAlloc", &fn, 2000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_null(fn);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_int_equal(T->tfd_requested_version("cuMemAlloc"), 2000);
    /* newer is fine */
    CU(get_proc("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
    assert_int_equal(T->tfd_requested_flags("cuMemAlloc"), CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    /* unknown and hidden names */
    fn = &fn;
    assert_int_equal(get_proc("cuNoSuchEntry", &fn, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_null(fn);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_int_equal(T->tfd_requested_version("cuNoSuchEntry"), 12000);
    assert_int_equal(T->tfd_requested_version("cuNeverAsked"), -1);
    T->tfd_hide("cuStreamCreate");
    fn = &fn;
    assert_int_equal(get_proc("cuStreamCreate", &fn, 2000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_null(fn);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_int_equal(get_proc("cuStreamCreate", &fn, 2000, 0, NULL), CUDA_ERROR_NOT_FOUND);
    /* bad arguments */
    assert_int_equal(get_proc("cuInit", &fn, 2000, 8, &st), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(get_proc(NULL, &fn, 2000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    /* both generations of cuGetProcAddress resolve themselves */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CU(get_proc("cuGetProcAddress", &fn, 12000, 0, &st));
    assert_ptr_equal(fn, dlsym(lib, "cuGetProcAddress_v2"));
    CU(get_proc("cuGetProcAddress", &fn, 11030, 0, &st));
    assert_ptr_equal(fn, dlsym(lib, "cuGetProcAddress"));
    PFN_cuGetProcAddress_v11030 v1;
    AS_FN(v1, fn);
    CU(v1("cuInit", &fn, 2000, 0));
    void *init = NULL;
    memcpy(&init, &D.cuInit, sizeof init);
    assert_ptr_equal(fn, init);
    dlclose(lib);
}

/* ---- initialisation and devices ------------------------------------------- */

static void test_init_rules(void **state) {
    (void)state;
    NEED_DOUBLE();
    int n = -1, v = 0;
    const char *s = NULL;
    CUcontext c = NULL;
    T->tfd_set_initialized(0);
    assert_int_equal(D.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(D.cuDevicePrimaryCtxRetain(&c, 0), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(D.cuCtxGetCurrent(&c), CUDA_ERROR_NOT_INITIALIZED);
    CU(D.cuDriverGetVersion(&v));
    assert_int_equal(v, 13000);
    CU(D.cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
    assert_string_equal(s, "CUDA_ERROR_INVALID_VALUE");
    T->tfd_set_devices(0);
    assert_int_equal(D.cuInit(0), CUDA_ERROR_NO_DEVICE);
    assert_int_equal(D.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    T->tfd_set_devices(1);
    assert_int_equal(D.cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuInit(0));
    CU(D.cuDeviceGetCount(&n));
    assert_int_equal(n, 1);
}

static int attr(CUdevice_attribute a, CUdevice dev) {
    int v = -1;
    CU(D.cuDeviceGetAttribute(&v, a, dev));
    return v;
}

static void test_devices(void **state) {
    (void)state;
    NEED_DOUBLE();
    int n = 0;
    CUdevice dev = -1;
    CU(D.cuDeviceGetCount(&n));
    assert_int_equal(n, 1);
    T->tfd_set_devices(3);
    CU(D.cuDeviceGetCount(&n));
    assert_int_equal(n, 3);
    CU(D.cuDeviceGet(&dev, 2));
    assert_int_equal(dev, 2);
    assert_int_equal(D.cuDeviceGet(&dev, 3), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(D.cuDeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE);

    char name[64];
    CU(D.cuDeviceGetName(name, sizeof name, 1));
    assert_string_equal(name, "tenferro double device 1");
    CU(D.cuDeviceGetName(name, 5, 1));
    assert_string_equal(name, "tenf");
    assert_int_equal(D.cuDeviceGetName(name, sizeof name, 3), CUDA_ERROR_INVALID_DEVICE);

    CUuuid u0, u1, u0b;
    CU(D.cuDeviceGetUuid(&u0, 0));
    CU(D.cuDeviceGetUuid(&u1, 1));
    CU(D.cuDeviceGetUuid(&u0b, 0));
    assert_memory_equal(u0.bytes, u0b.bytes, sizeof u0.bytes);
    assert_memory_not_equal(u0.bytes, u1.bytes, sizeof u0.bytes);

    size_t total = 0;
    CU(D.cuDeviceTotalMem(&total, 0));
    assert_true(total == (size_t)80 << 30);
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), 9);
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0), 0);
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), 132);
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0), 1);
    assert_int_not_equal(attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0),
                         attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1));
    T->tfd_set_attribute(1, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 10);
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1), 10);
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), 132);
    T->tfd_set_attribute(-1, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 64);
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, 2), 64);
    int v = 0;
    assert_int_equal(D.cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0),
                     CUDA_ERROR_INVALID_VALUE);

    int can = -1;
    CU(D.cuDeviceCanAccessPeer(&can, 0, 1));
    assert_int_equal(can, 0);
    T->tfd_set_peer_access(0, 1, 1);
    CU(D.cuDeviceCanAccessPeer(&can, 0, 1));
    assert_int_equal(can, 1);
    CU(D.cuDeviceCanAccessPeer(&can, 1, 0));
    assert_int_equal(can, 0);
    CU(D.cuDeviceCanAccessPeer(&can, 0, 0));
    assert_int_equal(can, 0);
    assert_int_equal(D.cuDeviceCanAccessPeer(&can, 0, 5), CUDA_ERROR_INVALID_DEVICE);

    T->tfd_reset(); /* back to one device, no overrides */
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), 32);
    assert_int_equal(D.cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
}

/* ---- fault rules and the call log ------------------------------------------ */

static void test_fault_nth_times(void **state) {
    (void)state;
    NEED_DOUBLE();
    int n = 0;
    CU(D.cuDeviceGetCount(&n)); /* calls before the rule do not count */
    T->tfd_fail("cuDeviceGetCount", 2, CUDA_ERROR_UNKNOWN, 2);
    CU(D.cuDeviceGetCount(&n));
    assert_int_equal(D.cuDeviceGetCount(&n), CUDA_ERROR_UNKNOWN);
    assert_int_equal(D.cuDeviceGetCount(&n), CUDA_ERROR_UNKNOWN);
    CU(D.cuDeviceGetCount(&n));
    assert_int_equal(T->tfd_calls("cuDeviceGetCount"), 5);

    T->tfd_clear_faults();
    T->tfd_fail("cuDeviceGetCount", 3, CUDA_ERROR_LAUNCH_FAILED, 0);
    CU(D.cuDeviceGetCount(&n));
    CU(D.cuDeviceGetCount(&n));
    for (int i = 0; i < 5; ++i) assert_int_equal(D.cuDeviceGetCount(&n), CUDA_ERROR_LAUNCH_FAILED);
    T->tfd_clear_faults();
    CU(D.cuDeviceGetCount(&n));

    /* a failed call has no effect */
    use_primary(0);
    T->tfd_fail("cuMemAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    CUdeviceptr p = 0;
    assert_int_equal(D.cuMemAlloc(&p, 64), CUDA_ERROR_OUT_OF_MEMORY);
    assert_true(p == 0);
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), 0);
    CU(D.cuMemAlloc(&p, 64));
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), 1);
    CU(D.cuMemFree(p));

    /* the first rule that fires decides; every matching rule counts */
    T->tfd_fail("cuDriverGetVersion", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    T->tfd_fail("cuDriverGetVersion", 1, CUDA_ERROR_NOT_FOUND, 2);
    assert_int_equal(D.cuDriverGetVersion(&n), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(D.cuDriverGetVersion(&n), CUDA_ERROR_NOT_FOUND);
    CU(D.cuDriverGetVersion(&n));
}

static void test_fault_after(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary(0);
    T->tfd_fail_after("cuCtxSetCurrent", 1, CUDA_ERROR_INVALID_CONTEXT, 1);
    assert_int_equal(D.cuCtxSetCurrent(NULL), CUDA_ERROR_INVALID_CONTEXT);
    assert_null(T->tfd_current_context()); /* it took effect */
    CU(D.cuCtxSetCurrent(c));
    T->tfd_fail_after("cuStreamCreate", 1, CUDA_ERROR_UNKNOWN, 1);
    CUstream s = NULL;
    assert_int_equal(D.cuStreamCreate(&s, 0), CUDA_ERROR_UNKNOWN);
    assert_non_null(s);
    assert_int_equal(T->tfd_live(TFD_STREAMS), 1);
    CU(D.cuStreamDestroy(s));
    /* a call that fails by itself keeps its own error */
    T->tfd_fail_after("cuStreamDestroy", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_int_equal(D.cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
}

static void test_fault_wildcard(void **state) {
    (void)state;
    NEED_DOUBLE();
    int v = 0;
    void *fn = NULL;
    const char *name = NULL;
    T->tfd_fail("*", 2, CUDA_ERROR_UNKNOWN, 2);
    CU(D.cuDriverGetVersion(&v));
    assert_int_equal(get_proc("cuInit", &fn, 2000, 0, NULL), CUDA_ERROR_UNKNOWN);
    assert_int_equal(D.cuGetErrorName(CUDA_SUCCESS, &name), CUDA_ERROR_UNKNOWN);
    assert_null(name); /* no effect */
    CU(D.cuDriverGetVersion(&v));
    /* companion names are not matched by "*" */
    T->tfd_clear_faults();
    T->tfd_fail("*", 1, CUDA_ERROR_UNKNOWN, 0);
    assert_int_equal(T->tfd_enter("cublasCreate_v2"), 0);
    assert_int_equal(T->tfd_enter("nvrtcVersion"), 0);
    assert_int_equal(T->tfd_enter("cuSomethingElse"), CUDA_ERROR_UNKNOWN);
    T->tfd_clear_faults();
    T->tfd_fail_after("cublasSgemm_v2", 1, 13, 1);
    int after = 0;
    assert_int_equal(T->tfd_enter_ex("cublasSgemm_v2", &after), 0);
    assert_int_equal(after, 13);
}

/* A delayed entry sleeps without the double's lock: another thread's calls
 * go through meanwhile.  tfd_reset removes the delay. */
struct delayed_create {
    CUcontext ctx;
    CUstream stream;
    CUresult rc;
};

static void *create_delayed(void *arg) {
    struct delayed_create *d = arg;
    d->rc = D.cuCtxSetCurrent(d->ctx);
    if (d->rc == CUDA_SUCCESS) d->rc = D.cuStreamCreate(&d->stream, 0);
    return NULL;
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void test_entry_delay(void **state) {
    (void)state;
    NEED_DOUBLE();
    struct delayed_create d = {use_primary(0), NULL, CUDA_ERROR_UNKNOWN};
    struct timespec t0;
    pthread_t th;
    int v = 0;
    T->tfd_set_entry_delay_us("cuStreamCreate", 500000);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pthread_create(&th, NULL, create_delayed, &d), 0);
    /* While that thread sleeps in cuStreamCreate, this one is served. */
    while (T->tfd_calls("cuCtxSetCurrent") < 2) usleep(1000);
    usleep(20000);
    CU(D.cuDriverGetVersion(&v));
    assert_true(seconds_since(&t0) < 0.5);
    assert_int_equal(T->tfd_calls("cuStreamCreate"), 0); /* counted when it runs */
    assert_int_equal(pthread_join(th, NULL), 0);
    CU(d.rc);
    assert_true(seconds_since(&t0) >= 0.5);
    assert_int_equal(T->tfd_calls("cuStreamCreate"), 1);
    CU(D.cuStreamDestroy(d.stream));
    /* Removed by 0 and by tfd_reset; other entries never slept. */
    T->tfd_set_entry_delay_us("cuStreamCreate", 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU(D.cuStreamCreate(&d.stream, 0));
    CU(D.cuStreamDestroy(d.stream));
    T->tfd_set_entry_delay_us("cuStreamCreate", 500000);
    T->tfd_reset();
    CU(D.cuStreamCreate(&d.stream, 0));
    CU(D.cuStreamDestroy(d.stream));
    assert_true(seconds_since(&t0) < 0.5);
}

static void test_call_log(void **state) {
    (void)state;
    NEED_DOUBLE();
    int v = 0, n = 0;
    void *fn = NULL;
    T->tfd_log_clear();
    CU(D.cuDriverGetVersion(&v));
    CU(D.cuDeviceGetCount(&n));
    T->tfd_fail("cuInit", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_int_equal(D.cuInit(0), CUDA_ERROR_UNKNOWN); /* failed calls are logged */
    CU(get_proc("cuInit", &fn, 2000, 0, NULL));
    assert_int_equal(T->tfd_log_count(), 4);
    assert_string_equal(T->tfd_log_name(0), "cuDriverGetVersion");
    assert_string_equal(T->tfd_log_name(1), "cuDeviceGetCount");
    assert_string_equal(T->tfd_log_name(2), "cuInit");
    assert_string_equal(T->tfd_log_name(3), "cuGetProcAddress");
    assert_null(T->tfd_log_name(4));

    const char *full = "cuDriverGetVersion,cuDeviceGetCount,cuInit,cuGetProcAddress";
    char small[16];
    assert_int_equal(T->tfd_log_format(small, sizeof small, 0), strlen(full));
    assert_string_equal(small, "cuDriverGetVers");
    char big[128];
    T->tfd_log_format(big, sizeof big, 2);
    assert_string_equal(big, "cuInit,cuGetProcAddress");
    assert_int_equal(T->tfd_log_format(NULL, 0, 4), 0);

    assert_int_equal(T->tfd_calls("cuInit"), 1);
    T->tfd_log_clear();
    assert_int_equal(T->tfd_log_count(), 0);
    assert_int_equal(T->tfd_calls("cuInit"), 1); /* counters survive log_clear */
    T->tfd_reset();
    assert_int_equal(T->tfd_calls("cuInit"), 0);
}

/* ---- contexts -------------------------------------------------------------- */

static void *thread_current(void *arg) {
    (void)arg;
    CUcontext c = (CUcontext)&c;
    if (D.cuCtxGetCurrent(&c) != CUDA_SUCCESS || c != NULL || T->tfd_current_context() != NULL)
        return (void *)1;
    return NULL;
}

static void test_primary_context(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext a = NULL, b = NULL;
    unsigned flags = 1;
    int active = -1;
    CU(D.cuDevicePrimaryCtxRetain(&a, 0));
    CU(D.cuDevicePrimaryCtxRetain(&b, 0));
    assert_ptr_equal(a, b);
    assert_ptr_equal(a, T->tfd_primary_context(0));
    assert_int_equal(T->tfd_primary_refcount(0), 2);
    CU(D.cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(flags, 0);
    assert_int_equal(active, 1);
    CU(D.cuDevicePrimaryCtxRelease(0));
    CU(D.cuDevicePrimaryCtxRelease(0));
    assert_int_equal(T->tfd_primary_refcount(0), 0);
    CU(D.cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 0);
    assert_int_equal(D.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(D.cuDevicePrimaryCtxRetain(&a, 1), CUDA_ERROR_INVALID_DEVICE);

    /* no current context */
    CUstream s = NULL;
    CUdeviceptr p = 0;
    CU(D.cuCtxSetCurrent(NULL));
    assert_int_equal(D.cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(D.cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    /* an inactive primary context may be current, but is not usable */
    CU(D.cuCtxSetCurrent(a));
    CUcontext cur = NULL;
    CU(D.cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, a);
    assert_int_equal(D.cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(D.cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    /* retaining activates it */
    CU(D.cuDevicePrimaryCtxRetain(&a, 0));
    CU(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    assert_int_equal(T->tfd_stream_flags(s), CU_STREAM_NON_BLOCKING);
    assert_ptr_equal(T->tfd_stream_context(s), a);
    assert_int_equal(T->tfd_stream_flags((void *)0x1234), ~0u);

    /* the current context is per thread */
    pthread_t th;
    void *ret = (void *)2;
    assert_int_equal(pthread_create(&th, NULL, thread_current, NULL), 0);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_null(ret);
    CU(D.cuStreamDestroy(s));
    CU(D.cuDevicePrimaryCtxRelease(0));
    assert_int_equal(T->tfd_reclaimed(TFD_STREAMS), 0);
}

static void test_foreign_context(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext a = use_primary(0);
    CUstream s = NULL;
    CUevent e = NULL;
    CU(D.cuStreamCreate(&s, 0));
    CU(D.cuEventCreate(&e, 0));
    void *other = T->tfd_create_context(0);
    assert_non_null(other);
    assert_ptr_not_equal(other, a);
    assert_int_equal(T->tfd_live(TFD_CONTEXTS), 1);
    CU(D.cuCtxSetCurrent((CUcontext)other));
    assert_int_equal(D.cuStreamSynchronize(s), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(D.cuStreamDestroy(s), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(D.cuEventRecord(e, NULL), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(D.cuEventQuery(e), CUDA_ERROR_INVALID_CONTEXT);
    CUdeviceptr p = 0;
    assert_int_equal(D.cuMemAllocAsync(&p, 64, s), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(D.cuStreamSynchronize((CUstream)(uintptr_t)0x7000), CUDA_ERROR_INVALID_HANDLE);
    CU(D.cuStreamSynchronize(NULL)); /* the default stream of `other` */
    CU(D.cuStreamSynchronize(CU_STREAM_LEGACY));
    /* a destroyed context: not usable, cannot be made current again */
    T->tfd_destroy_context(other);
    assert_int_equal(T->tfd_live(TFD_CONTEXTS), 0);
    assert_int_equal(D.cuStreamSynchronize(NULL), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(D.cuCtxSetCurrent((CUcontext)other), CUDA_ERROR_INVALID_CONTEXT);
    CU(D.cuCtxSetCurrent(a));
    CU(D.cuEventDestroy(e));
    CU(D.cuStreamDestroy(s));
}

static void test_reclaim_on_release(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext a = use_primary(0);
    CUstream s = NULL;
    CUevent e = NULL;
    CUdeviceptr p = 0;
    CU(D.cuStreamCreate(&s, 0));
    CU(D.cuEventCreate(&e, 0));
    CU(D.cuMemAlloc(&p, 64));
    uint64_t mine = T->tfd_device_alloc(0, 64); /* test memory is never reclaimed */
    assert_true(mine != 0);
    CU(D.cuDevicePrimaryCtxRelease(0));
    assert_int_equal(T->tfd_reclaimed(TFD_STREAMS), 1);
    assert_int_equal(T->tfd_reclaimed(TFD_EVENTS), 1);
    assert_int_equal(T->tfd_reclaimed(TFD_DEVICE_ALLOCS), 1);
    assert_int_equal(T->tfd_live(TFD_STREAMS), 0);
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), 0);
    CUcontext again = NULL;
    CU(D.cuDevicePrimaryCtxRetain(&again, 0));
    assert_ptr_equal(again, a);
    assert_int_equal(D.cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(D.cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    CUdeviceptr base = 0;
    size_t size = 0;
    assert_int_equal(D.cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
    assert_non_null(T->tfd_translate(mine, 64));
    T->tfd_device_free(mine);
    assert_null(T->tfd_translate(mine, 64));
    CU(D.cuDevicePrimaryCtxRelease(0));
}

/* 1 when `n` bytes at p can be read: process_vm_readv of this process
 * copies them, or fails with EFAULT without a fault (and, unlike a write(2)
 * of them, valgrind does not take the probe of unreadable memory for a
 * bug: it cannot check another process's addresses). */
static int readable(const void *p, size_t n) {
    static unsigned char copy[8192];
    struct iovec local = {copy, n}, remote = {(void *)(uintptr_t)p, n};
    assert_true(n <= sizeof copy);
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n;
}

/* The end of a context frees its page-locked memory, PORTABLE or not, as
 * the reset of a primary context does on a GPU: blocks are unmapped (the
 * addresses stay reserved, so a stale read faults), registrations go. */
static void test_page_locked_memory_goes_with_its_context(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary(0);
    void *portable = NULL, *plain = NULL;
    static unsigned char mine[8192] __attribute__((aligned(4096)));
    unsigned mt = 0;
    CU(D.cuMemHostAlloc(&portable, 4096, CU_MEMHOSTALLOC_PORTABLE));
    CU(D.cuMemHostAlloc(&plain, 100, 0));
    CU(D.cuMemHostRegister(mine, sizeof mine, CU_MEMHOSTREGISTER_PORTABLE));
    memset(portable, 1, 4096);
    assert_true(readable(portable, 4096) && readable(plain, 100));
    CU(D.cuDevicePrimaryCtxRelease(0));
    assert_int_equal(T->tfd_live(TFD_HOST_ALLOCS), 0);
    assert_int_equal(T->tfd_reclaimed(TFD_HOST_ALLOCS), 2);
    assert_int_equal(T->tfd_host_alloc_flags(portable), ~0u);
    assert_false(readable(portable, 1));
    assert_false(readable(plain, 1));
    assert_int_equal(D.cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                             (CUdeviceptr)(uintptr_t)mine),
                     CUDA_ERROR_INVALID_VALUE); /* pageable again */
    assert_true(readable(mine, sizeof mine));   /* the caller's memory stays */
    /* a new block never lands on a reclaimed one's addresses */
    void *next = NULL;
    use_primary(0);
    CU(D.cuMemHostAlloc(&next, 4096, CU_MEMHOSTALLOC_PORTABLE));
    assert_ptr_not_equal(next, portable);
    CU(D.cuMemFreeHost(next));
    CU(D.cuDevicePrimaryCtxRelease(0));
}

/* ---- memory ------------------------------------------------------------------ */

static void test_memory_layout(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary(0);
    CUdeviceptr a = 0, b = 0, x = 0;
    CU(D.cuMemAlloc(&a, 1000));
    CU(D.cuMemAlloc(&b, 10));
    assert_true(a >= 0x1000000000000000ull);
    assert_true(a % 256 == 0 && b % 256 == 0);
    assert_true(b >= a + 1000 + 4096);
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), 2);
    assert_int_equal(D.cuMemAlloc(&x, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemAlloc(&x, (size_t)81 << 30), CUDA_ERROR_OUT_OF_MEMORY);
    T->tfd_set_total_mem(0, 1 << 20);
    assert_int_equal(D.cuMemAlloc(&x, 1 << 20), CUDA_ERROR_OUT_OF_MEMORY);
    CU(D.cuMemAlloc(&x, 4096));
    CU(D.cuMemFree(x));
    T->tfd_set_total_mem(-1, (size_t)80 << 30);

    CUdeviceptr base = 0;
    size_t size = 0;
    CU(D.cuMemGetAddressRange(&base, &size, a + 999));
    assert_true(base == a);
    assert_int_equal(size, 1000);
    CU(D.cuMemGetAddressRange(NULL, &size, b));
    assert_int_equal(size, 10);
    assert_int_equal(D.cuMemGetAddressRange(&base, &size, a + 1000), CUDA_ERROR_NOT_FOUND);

    unsigned mt = 0;
    int ordinal = -1;
    CUcontext owner = NULL;
    CU(D.cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 5));
    assert_int_equal(mt, CU_MEMORYTYPE_DEVICE);
    CU(D.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
    assert_int_equal(ordinal, 0);
    CU(D.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, a));
    assert_ptr_equal(owner, c);
    assert_int_equal(D.cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_BUFFER_ID, a),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 1000),
                     CUDA_ERROR_INVALID_VALUE);

    CU(D.cuMemFree(a));
    CU(D.cuMemFree(b));
    assert_int_equal(D.cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuMemFree(0));
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), 0);

    uint64_t t = T->tfd_device_alloc(0, 64);
    assert_true(t != 0);
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), 0);
    assert_non_null(T->tfd_translate(t, 64));
    assert_null(T->tfd_translate(t, 65));
    assert_null(T->tfd_translate(t + 64, 1));
    T->tfd_device_free(t);
}

static void test_memory_copies(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary(0);
    CUdeviceptr a = 0, b = 0;
    CU(D.cuMemAlloc(&a, 1000));
    CU(D.cuMemAlloc(&b, 10));
    unsigned char host[1000], back[1000], small[10];
    for (int i = 0; i < 1000; ++i) host[i] = (unsigned char)(i * 7);
    CU(D.cuMemcpyHtoDAsync(a, host, 1000, NULL));
    assert_int_equal(D.cuMemcpyHtoDAsync(a + 1, host, 1000, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemcpyHtoDAsync(a + 1100, host, 10, NULL), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuMemcpyDtoHAsync(back, a, 1000, NULL));
    assert_memory_equal(back, host, 1000);
    CU(D.cuMemcpyDtoDAsync(b, a + 500, 10, NULL));
    assert_int_equal(T->tfd_device_read(b, small, 10), 0);
    assert_int_equal(small[0], 0xCD); /* queued, not run: b is still fresh */
    CU(D.cuStreamSynchronize(NULL));
    assert_int_equal(T->tfd_device_read(b, small, 10), 0);
    assert_memory_equal(small, host + 500, 10);
    assert_int_equal(D.cuMemcpyDtoDAsync(b, a, 11, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemcpyDtoDAsync(b, a + 995, 10, NULL), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuMemsetD8Async(a, 0x5A, 1000, NULL));
    CU(D.cuMemcpyDtoHAsync(back, a, 1000, NULL));
    for (int i = 0; i < 1000; ++i) assert_int_equal(back[i], 0x5A);
    assert_int_equal(D.cuMemsetD8Async(a, 0, 1001, NULL), CUDA_ERROR_INVALID_VALUE);
    /* a device address where a host pointer belongs */
    assert_int_equal(D.cuMemcpyDtoHAsync((void *)(uintptr_t)b, a, 4, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    /* zero bytes is a no-op */
    CU(D.cuMemcpyHtoDAsync(a + 5000, host, 0, NULL));
    /* fresh memory is not zeroed */
    CUdeviceptr f = 0;
    CU(D.cuMemAlloc(&f, 16));
    CU(D.cuMemcpyDtoHAsync(small, f, 10, NULL));
    assert_int_not_equal(small[0], 0);
    CU(D.cuMemFree(f));
    CU(D.cuMemFree(a));
    CU(D.cuMemFree(b));
}

static void test_host_and_async_memory(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary(0);
    void *h = NULL;
    unsigned char stack[16];
    unsigned mt = 0;
    CU(D.cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    memset(h, 1, 4096); /* real host memory */
    assert_int_equal(T->tfd_host_alloc_flags(h),
                     CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    assert_int_equal(T->tfd_host_alloc_flags((char *)h + 100),
                     CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    assert_int_equal(T->tfd_host_alloc_flags(stack), ~0u);
    assert_int_equal(T->tfd_live(TFD_HOST_ALLOCS), 1);
    CU(D.cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                               (CUdeviceptr)(uintptr_t)h + 10));
    assert_int_equal(mt, CU_MEMORYTYPE_HOST);
    CUcontext owner = NULL;
    CU(D.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)(uintptr_t)h));
    assert_ptr_equal(owner, c);
    assert_int_equal(D.cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                             (CUdeviceptr)(uintptr_t)stack),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemHostAlloc(&h, 16, 0x80), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemHostAlloc(&h, 0, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemFreeHost(stack), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemFreeHost((char *)h + 1), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuMemFreeHost(h));
    assert_int_equal(D.cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(T->tfd_live(TFD_HOST_ALLOCS), 0);

    CUstream s = NULL;
    CUdeviceptr x = 0;
    CU(D.cuStreamCreate(&s, 0));
    CU(D.cuMemAllocAsync(&x, 64, s));
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), 1);
    assert_int_equal(D.cuMemFreeAsync(x + 1, s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemAllocAsync(&x, 0, s), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuMemFreeAsync(x, s));
    assert_int_equal(D.cuMemFreeAsync(x, s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemAllocAsync(&x, 64, (CUstream)(uintptr_t)0x7770),
                     CUDA_ERROR_INVALID_HANDLE);
    T->tfd_set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
    assert_int_equal(D.cuMemAllocAsync(&x, 64, s), CUDA_ERROR_NOT_SUPPORTED);
    CU(D.cuStreamDestroy(s));
}

/* ---- memory pools ---------------------------------------------------------- */

static CUmemoryPool make_pool(int dev, size_t max_size) {
    CUmemPoolProps props;
    CUmemoryPool pool = NULL;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    props.maxSize = max_size;
    CU(D.cuMemPoolCreate(&pool, &props));
    return pool;
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr) {
    cuuint64_t v = 0;
    CU(D.cuMemPoolGetAttribute(pool, attr, &v));
    return v;
}

/* The default pool releases at every synchronizing call (threshold 0); a
 * pool with a high threshold keeps freed blocks and hands the same address
 * out again; a block freed on a stream is reusable there before the free
 * ran, elsewhere only after. */
static void test_memory_pools(void **state) {
    CUstream s = NULL, t = NULL;
    CUdeviceptr a = 0, b = 0, c = 0;
    CUmemoryPool pool, def = NULL;
    cuuint64_t keep = UINT64_MAX;
    size_t free_b = 0, total_b = 0;
    struct tfd_mem_pool_info info;
    (void)state;
    NEED_DOUBLE();
    use_primary(0);
    CU(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(D.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
    CU(D.cuDeviceGetDefaultMemPool(&def, 0));
    assert_ptr_equal(def, T->tfd_default_mem_pool(0));
    CU(D.cuCtxSynchronize()); /* what earlier tests freed goes back */
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    CU(D.cuMemAllocAsync(&a, 1000, s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 1024);
    CU(D.cuMemFreeAsync(a, s));
    CU(D.cuStreamSynchronize(s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    assert_int_equal(D.cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);

    pool = make_pool(0, 0);
    assert_int_equal(T->tfd_live(TFD_MEM_POOLS), 1);
    CU(D.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    CU(D.cuMemAllocFromPoolAsync(&a, 4096, pool, s));
    CU(D.cuMemFreeAsync(a, s));
    CU(D.cuMemAllocFromPoolAsync(&b, 4096, pool, t)); /* the free has not run */
    assert_true(b != a);
    CU(D.cuMemAllocFromPoolAsync(&c, 4000, pool, s)); /* stream order: a's block */
    assert_true(c == a);
    CU(D.cuStreamSynchronize(s));
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), 2);
    CU(D.cuMemFreeAsync(b, t));
    CU(D.cuMemFreeAsync(c, s));
    CU(D.cuCtxSynchronize());
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8192); /* kept */
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    CU(D.cuMemsetD8Async(b, 1, 4096, t)); /* freed, but still mapped: no fault */
    CU(D.cuStreamSynchronize(t));
    CU(D.cuMemAllocFromPoolAsync(&a, 4096, pool, t)); /* both blocks free now */
    assert_true(a == b || a == c);
    CU(D.cuMemGetInfo(&free_b, &total_b));
    assert_int_equal(total_b - free_b, 8192);
    CU(D.cuMemPoolTrimTo(pool, 0)); /* a's block is in use */
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4096);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 8192);
    keep = 0;
    CU(D.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &keep));
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 4096);
    keep = 1;
    assert_int_equal(D.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &keep),
                     CUDA_ERROR_INVALID_VALUE);
    /* Destroyed with an allocation outstanding: it goes with the free. */
    CU(D.cuMemPoolDestroy(pool));
    assert_int_equal(T->tfd_mem_pool_info(pool, &info), 0);
    assert_int_equal(info.destroyed, 1);
    assert_int_equal(D.cuMemAllocFromPoolAsync(&b, 64, pool, s), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuMemFreeAsync(a, t));
    CU(D.cuStreamSynchronize(t));
    assert_int_equal(T->tfd_live(TFD_MEM_POOLS), 0);
    assert_int_equal(T->tfd_mem_pool_info(pool, &info), -1);

    /* maxSize and the device's memory bound the reservations. */
    pool = make_pool(0, 8192);
    CU(D.cuMemAllocFromPoolAsync(&a, 8192, pool, s));
    assert_int_equal(D.cuMemAllocFromPoolAsync(&b, 1, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
    CU(D.cuMemFreeAsync(a, s));
    CU(D.cuMemAllocFromPoolAsync(&b, 1, pool, s)); /* a's block, wasteful but in order */
    CU(D.cuMemFreeAsync(b, s));
    T->tfd_set_total_mem(0, 4096);
    CU(D.cuStreamSynchronize(s));
    CU(D.cuMemPoolTrimTo(pool, 0));
    assert_int_equal(D.cuMemAllocFromPoolAsync(&a, 8192, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
    CU(D.cuMemPoolDestroy(pool));
    assert_int_equal(T->tfd_live(TFD_MEM_POOLS), 0);
    CU(D.cuStreamDestroy(s));
    CU(D.cuStreamDestroy(t));
}

/* Stream memory operations are on, as on an H200, until the attribute says
 * they are off. */
static void test_stream_mem_ops_switch(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary(0);
    void *h = NULL;
    CUstream s = NULL;
    CUdeviceptr dev = 0;
    CU(D.cuMemHostAlloc(&h, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    CU(D.cuMemHostGetDevicePointer(&dev, h, 0));
    CU(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0), 1);
    CU(D.cuStreamWriteValue32(s, dev, 7, CU_STREAM_WRITE_VALUE_DEFAULT));
    CU(D.cuStreamSynchronize(s));
    assert_int_equal(*(volatile uint32_t *)h, 7);
    T->tfd_set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0);
    assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0), 0);
    assert_int_equal(D.cuStreamWriteValue32(s, dev, 8, CU_STREAM_WRITE_VALUE_DEFAULT),
                     CUDA_ERROR_NOT_SUPPORTED);
    CU(D.cuStreamSynchronize(s));
    assert_int_equal(*(volatile uint32_t *)h, 7);
    CU(D.cuStreamDestroy(s));
    CU(D.cuMemFreeHost(h));
}

static void test_peer(void **state) {
    (void)state;
    NEED_DOUBLE();
    T->tfd_set_devices(2);
    T->tfd_set_peer_access(0, 1, 1);
    CUcontext c0 = NULL, c1 = NULL;
    CU(D.cuDevicePrimaryCtxRetain(&c0, 0));
    CU(D.cuDevicePrimaryCtxRetain(&c1, 1));
    assert_ptr_not_equal(c0, c1);
    CUdeviceptr p0 = 0, p1 = 0;
    CU(D.cuCtxSetCurrent(c0));
    CU(D.cuMemAlloc(&p0, 64));
    CU(D.cuCtxSetCurrent(c1));
    CU(D.cuMemAlloc(&p1, 64));
    int ordinal = -1;
    CU(D.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p1));
    assert_int_equal(ordinal, 1);
    /* A range is found from a context of the allocation's device only (the
     * real driver may answer so); the device ordinal from any context. */
    CUdeviceptr base = 0;
    size_t size = 0;
    assert_int_equal(D.cuMemGetAddressRange(&base, &size, p0), CUDA_ERROR_NOT_FOUND);
    CU(D.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p0));
    assert_int_equal(ordinal, 0);
    CU(D.cuMemGetAddressRange(&base, &size, p1));
    assert_true(base == p1 && size == 64);

    unsigned char data[64], back[64];
    for (int i = 0; i < 64; ++i) data[i] = (unsigned char)(200 - i);
    assert_int_equal(T->tfd_device_write(p0, data, 64), 0);
    CU(D.cuMemcpyPeerAsync(p1, c1, p0, c0, 64, NULL));
    assert_int_equal(T->tfd_pending(NULL), 1);
    CU(D.cuStreamSynchronize(NULL));
    assert_int_equal(T->tfd_device_read(p1, back, 64), 0);
    assert_memory_equal(back, data, 64);
    assert_int_equal(D.cuMemcpyPeerAsync(p1, c0, p0, c0, 64, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuMemcpyPeerAsync(p1, (CUcontext)(uintptr_t)0x50, p0, c0, 64, NULL),
                     CUDA_ERROR_INVALID_CONTEXT);

    /* device 1 may not access device 0 */
    assert_int_equal(D.cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    CU(D.cuCtxSetCurrent(c0));
    assert_int_equal(D.cuCtxEnablePeerAccess(c1, 1), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuCtxEnablePeerAccess(c1, 0));
    assert_int_equal(D.cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    assert_int_equal(T->tfd_peer_enabled(c0, c1), 1);
    assert_int_equal(T->tfd_peer_enabled(c1, c0), 0);
    assert_int_equal(D.cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_INVALID_DEVICE);

    CU(D.cuMemFree(p0));
    CU(D.cuMemFree(p1));
    CU(D.cuDevicePrimaryCtxRelease(1));
    assert_int_equal(T->tfd_peer_enabled(c0, c1), 0); /* gone with the context */
    CU(D.cuDevicePrimaryCtxRelease(0));
}

/* ---- events -------------------------------------------------------------------- */

static void test_event_pending(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary(0);
    CUstream s = NULL, nb = NULL;
    CUstream bad = NULL;
    CUevent e = NULL, e2 = NULL, x = NULL;
    CU(D.cuStreamCreate(&s, 0));
    CU(D.cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    assert_int_equal(D.cuStreamCreate(&bad, 4), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CU(D.cuEventCreate(&e2, 0));
    assert_int_equal(D.cuEventCreate(&x, 0x40), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuEventCreate(&x, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
    CU(D.cuEventQuery(e)); /* never recorded */

    T->tfd_set_async_pending(1);
    CU(D.cuEventRecord(e, s));
    assert_int_equal(D.cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CU(D.cuStreamSynchronize(s));
    CU(D.cuEventQuery(e));
    CU(D.cuEventRecord(e, s));
    assert_int_equal(D.cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CU(D.cuEventSynchronize(e));
    CU(D.cuEventQuery(e));
    CU(D.cuEventRecord(e, s));
    T->tfd_complete_all();
    CU(D.cuEventQuery(e));
    /* syncing another stream does not complete it */
    CU(D.cuEventRecord(e, s));
    CU(D.cuStreamSynchronize(nb));
    assert_int_equal(D.cuEventQuery(e), CUDA_ERROR_NOT_READY);
    /* the legacy stream waits for blocking streams, not non-blocking ones */
    CU(D.cuEventRecord(e2, nb));
    CU(D.cuStreamSynchronize(NULL));
    CU(D.cuEventQuery(e));
    assert_int_equal(D.cuEventQuery(e2), CUDA_ERROR_NOT_READY);
    CU(D.cuStreamSynchronize(nb));
    CU(D.cuEventQuery(e2));
    CU(D.cuEventRecord(e2, NULL));
    assert_int_equal(D.cuEventQuery(e2), CUDA_ERROR_NOT_READY);
    CU(D.cuStreamSynchronize(NULL));
    CU(D.cuEventQuery(e2));
    T->tfd_set_async_pending(0);
    CU(D.cuEventRecord(e, s));
    CU(D.cuEventQuery(e));

    CU(D.cuStreamWaitEvent(s, e, 0));
    assert_int_equal(D.cuStreamWaitEvent(s, (CUevent)(uintptr_t)0xdead0, 0),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(D.cuStreamWaitEvent(s, e, 2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuStreamWaitEvent((CUstream)(uintptr_t)0x990, e, 0),
                     CUDA_ERROR_INVALID_HANDLE);
    /* cross-context waits are allowed, other uses of the event are not */
    void *other = T->tfd_create_context(0);
    T->tfd_set_current(other);
    CU(D.cuStreamWaitEvent(NULL, e, 0));
    assert_int_equal(D.cuEventSynchronize(e), CUDA_ERROR_INVALID_CONTEXT);
    T->tfd_set_current(c);
    T->tfd_destroy_context(other);

    CU(D.cuEventDestroy(e));
    assert_int_equal(D.cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
    CU(D.cuEventDestroy(e2));
    assert_int_equal(D.cuStreamDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
    CU(D.cuStreamDestroy(s));
    CU(D.cuStreamDestroy(nb));
}

/* ---- sticky faults --------------------------------------------------------------- */

static void test_sticky_poison(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary(0);
    CUstream s = NULL;
    CUevent e = NULL;
    CUdeviceptr p = 0;
    CU(D.cuStreamCreate(&s, 0));
    CU(D.cuEventCreate(&e, 0));
    T->tfd_poison_context(c, CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(T->tfd_context_poison(c), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(D.cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(D.cuStreamCreate(&s, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(D.cuMemAlloc(&p, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(D.cuEventQuery(e), CUDA_ERROR_ILLEGAL_ADDRESS);
    /* calls that need no context still work */
    CUcontext cur = NULL;
    int n = 0;
    unsigned flags = 0;
    int active = 0;
    CU(D.cuCtxGetCurrent(&cur));
    CU(D.cuDeviceGetCount(&n));
    CU(D.cuDevicePrimaryCtxGetState(0, &flags, &active));
    /* an event of the poisoned context poisons waits from elsewhere */
    void *other = T->tfd_create_context(0);
    T->tfd_set_current(other);
    assert_int_equal(D.cuStreamWaitEvent(NULL, e, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(D.cuStreamSynchronize(s), CUDA_ERROR_INVALID_CONTEXT);
    T->tfd_destroy_context(other);
    /* destroying the context clears the fault and its objects */
    T->tfd_set_current(c);
    CU(D.cuDevicePrimaryCtxRelease(0));
    assert_int_equal(T->tfd_context_poison(c), 0);
    assert_int_equal(T->tfd_reclaimed(TFD_STREAMS), 1);
    assert_int_equal(T->tfd_reclaimed(TFD_EVENTS), 1);
    CU(D.cuDevicePrimaryCtxRetain(&cur, 0));
    CU(D.cuStreamCreate(&s, 0));
    T->tfd_poison_context(c, CUDA_ERROR_LAUNCH_FAILED);
    assert_int_equal(D.cuStreamDestroy(s), CUDA_ERROR_LAUNCH_FAILED);
    T->tfd_poison_context(c, 0);
    CU(D.cuStreamDestroy(s));
}

/* ---- modules and kernels ----------------------------------------------------------- */

static const char kPtx[] =
    "//\n// test image\n//\n.version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".visible .entry tfd_fill_u32(\n\t.param .u64 p0\n)\n{\n\tret;\n}\n"
    ".entry tfd_add_f32(\n)\n{\n\tret;\n}\n"
    ".visible .entry tfd_illegal_address()\n{\n\tret;\n}\n"
    ".visible .entry my_kernel(\n)\n{\n\tret;\n}\n";

static CUresult load(CUmodule *m, const char *image, char *err, size_t cap) {
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {err, (void *)(uintptr_t)cap};
    err[0] = '\0';
    return D.cuModuleLoadDataEx(m, image, 2, opts, vals);
}

static void test_module_load(void **state) {
    (void)state;
    NEED_DOUBLE();
    use_primary(0);
    char err[256], info[256];
    CUjit_option opts[5] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_LOG_VERBOSE};
    void *vals[5] = {err, (void *)(uintptr_t)sizeof err, info, (void *)(uintptr_t)sizeof info,
                     (void *)(uintptr_t)1};
    CUmodule m = NULL, m2 = NULL;
    CU(D.cuModuleLoadDataEx(&m, kPtx, 5, opts, vals));
    assert_int_equal(T->tfd_live(TFD_MODULES), 1);
    assert_non_null(strstr(info, "4 entries"));
    assert_true((uintptr_t)vals[3] == strlen(info) + 1);

    static const char elf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
    assert_int_equal(load(&m2, elf, err, sizeof err), CUDA_ERROR_INVALID_IMAGE);
    assert_true(strlen(err) > 0);
    assert_int_equal(load(&m2, "just some text\n", err, sizeof err), CUDA_ERROR_INVALID_IMAGE);
    assert_non_null(strstr(err, "entry"));
    assert_int_equal(D.cuModuleLoadDataEx(&m2, "", 0, NULL, NULL), CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(load(&m2, ".version 8.0\n.target sm_100\n.visible .entry tfd_fill_u32(\n)\n",
                          err, sizeof err),
                     CUDA_ERROR_INVALID_PTX);
    assert_int_equal(
        load(&m2, ".version 9.9\n.target sm_90\n.entry tfd_fill_u32()\n", err, sizeof err),
        CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
    CUjit_option bad = (CUjit_option)9999;
    void *bad_val = NULL;
    assert_int_equal(D.cuModuleLoadDataEx(&m2, kPtx, 1, &bad, &bad_val), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(T->tfd_live(TFD_MODULES), 1);

    CUfunction f = NULL, f2 = NULL;
    CU(D.cuModuleGetFunction(&f, m, "tfd_fill_u32"));
    CU(D.cuModuleGetFunction(&f2, m, "tfd_fill_u32"));
    assert_ptr_equal(f, f2);
    CU(D.cuModuleGetFunction(&f2, m, "tfd_add_f32"));
    assert_ptr_not_equal(f, f2);
    /* declared in the image, but not a kernel the double can run */
    assert_int_equal(D.cuModuleGetFunction(&f2, m, "my_kernel"), CUDA_ERROR_NO_BINARY_FOR_GPU);
    const char *text = NULL;
    CU(D.cuGetErrorString(CUDA_ERROR_NO_BINARY_FOR_GPU, &text));
    assert_string_equal(text,
                        "no kernel image is available for execution on the device (the "
                        "driver double runs only these kernels: tfd_fill_u32, tfd_add_f32, "
                        "tfd_illegal_address, tf_read_scalar, tf_bench_spin, tf_bench_cg_dot, "
                        "tf_bench_cg_xr, tf_bench_cg_p)");
    assert_int_equal(D.cuModuleGetFunction(&f2, m, "nope"), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(D.cuModuleGetFunction(&f2, (CUmodule)(uintptr_t)0x4440, "tfd_fill_u32"),
                     CUDA_ERROR_INVALID_HANDLE);
    CU(D.cuModuleUnload(m));
    assert_int_equal(D.cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(D.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0),
                     CUDA_ERROR_INVALID_HANDLE);
}

static void test_kernels(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary(0);
    char err[128];
    CUmodule m = NULL;
    CUfunction fill = NULL, add = NULL, ill = NULL;
    CU(load(&m, kPtx, err, sizeof err));
    CU(D.cuModuleGetFunction(&fill, m, "tfd_fill_u32"));
    CU(D.cuModuleGetFunction(&add, m, "tfd_add_f32"));
    CU(D.cuModuleGetFunction(&ill, m, "tfd_illegal_address"));

    CUdeviceptr d = 0;
    CU(D.cuMemAlloc(&d, 64 * 4));
    uint64_t dp = d;
    uint32_t val = 0xABCD1234u, n = 64;
    void *args[] = {&dp, &val, &n};
    CU(D.cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    uint32_t out[64];
    CU(D.cuMemcpyDtoHAsync(out, d, sizeof out, NULL));
    for (int i = 0; i < 64; ++i) assert_int_equal(out[i], 0xABCD1234u);

    assert_int_equal(D.cuLaunchKernel(fill, 0, 1, 1, 64, 1, 1, 0, NULL, args, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuLaunchKernel(fill, 1, 1, 1, 1025, 1, 1, 0, NULL, args, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuLaunchKernel(fill, 1, 1, 1, 32, 32, 2, 0, NULL, args, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuLaunchKernel(fill, 1, 1, 1, 64, 1, 0, 0, NULL, args, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, NULL, args, args),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 65536, NULL, args, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    CU(D.cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
    assert_int_equal(T->tfd_func_attribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
                     65536);
    assert_int_equal(
        T->tfd_func_attribute(fill, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT), -1);
    CU(D.cuLaunchKernel(fill, 2, 1, 1, 32, 1, 1, 65536, NULL, args, NULL));
    assert_int_equal(D.cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_NUM_REGS, 1),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(
        D.cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1 << 20),
        CUDA_ERROR_INVALID_VALUE);

    /* add */
    CUdeviceptr x = 0, y = 0, z = 0;
    float hx[16], hy[16], hz[16];
    for (int i = 0; i < 16; ++i) {
        hx[i] = (float)i * 0.5f;
        hy[i] = 100.0f - (float)i;
    }
    CU(D.cuMemAlloc(&x, sizeof hx));
    CU(D.cuMemAlloc(&y, sizeof hy));
    CU(D.cuMemAlloc(&z, sizeof hz));
    CU(D.cuMemcpyHtoDAsync(x, hx, sizeof hx, NULL));
    CU(D.cuMemcpyHtoDAsync(y, hy, sizeof hy, NULL));
    uint64_t px = x, py = y, pz = z;
    uint32_t cnt = 16;
    void *add_args[] = {&px, &py, &pz, &cnt};
    CU(D.cuLaunchKernel(add, 1, 1, 1, 16, 1, 1, 0, NULL, add_args, NULL));
    CU(D.cuMemcpyDtoHAsync(hz, z, sizeof hz, NULL));
    for (int i = 0; i < 16; ++i) assert_true(hz[i] == hx[i] + hy[i]);

    /* a kernel touching memory outside an allocation: asynchronous fault */
    n = 65;
    CU(D.cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    assert_int_equal(D.cuStreamSynchronize(NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(T->tfd_context_poison(c), CUDA_ERROR_ILLEGAL_ADDRESS);
    T->tfd_poison_context(c, 0);
    /* the built-in faulting kernel: the fault comes when it runs */
    CU(D.cuLaunchKernel(ill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CUdeviceptr extra = 0;
    CU(D.cuMemAlloc(&extra, 4));
    assert_int_equal(T->tfd_context_poison(c), 0);
    assert_int_equal(T->tfd_step(NULL, 1), 1);
    assert_int_equal(T->tfd_context_poison(c), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(D.cuMemAlloc(&extra, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
    T->tfd_poison_context(c, 0);
    CU(D.cuMemFree(extra));

    /* functions die with their module */
    CU(D.cuModuleUnload(m));
    n = 4;
    assert_int_equal(D.cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
                     CUDA_ERROR_INVALID_HANDLE);
    CU(D.cuMemFree(d));
    CU(D.cuMemFree(x));
    CU(D.cuMemFree(y));
    CU(D.cuMemFree(z));
}

/* ---- error names ----------------------------------------------------------------- */

static void test_error_names(void **state) {
    (void)state;
    NEED_DOUBLE();
    static const int codes[] = {0,   1,   2,   3,   4,   34,  100, 101, 200, 201, 209, 300, 400,
                                500, 600, 700, 702, 710, 714, 715, 716, 717, 718, 719, 801, 999};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; ++i) {
        const char *name = NULL, *text = NULL;
        CU(D.cuGetErrorName((CUresult)codes[i], &name));
        CU(D.cuGetErrorString((CUresult)codes[i], &text));
        assert_non_null(name);
        assert_non_null(text);
        assert_true(strncmp(name, "CUDA_", 5) == 0);
    }
    const char *s = NULL;
    CU(D.cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    assert_string_equal(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
    CU(D.cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    assert_string_equal(s, "an illegal memory access was encountered");
    CU(D.cuGetErrorString(CUDA_SUCCESS, &s));
    assert_string_equal(s, "no error");
    s = "x";
    assert_int_equal(D.cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
    assert_int_equal(D.cuGetErrorString((CUresult)35, &s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(D.cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* ---- cuBLAS ---------------------------------------------------------------------- */

struct cublas {
    __typeof__(cublasCreate_v2) *create;
    __typeof__(cublasDestroy_v2) *destroy;
    __typeof__(cublasSetStream_v2) *set_stream;
    __typeof__(cublasGetStream_v2) *get_stream;
    __typeof__(cublasSetPointerMode_v2) *set_pointer_mode;
    __typeof__(cublasGetPointerMode_v2) *get_pointer_mode;
    __typeof__(cublasSetWorkspace_v2) *set_workspace;
    __typeof__(cublasGetVersion_v2) *get_version;
    __typeof__(cublasGetProperty) *get_property;
    __typeof__(cublasGetStatusName) *status_name;
    __typeof__(cublasGetStatusString) *status_string;
    __typeof__(cublasSgemm_v2) *sgemm;
    __typeof__(cublasDgemm_v2) *dgemm;
};

static void load_cublas(void *lib, struct cublas *b) {
    LOAD(lib, b->create, "cublasCreate_v2");
    LOAD(lib, b->destroy, "cublasDestroy_v2");
    LOAD(lib, b->set_stream, "cublasSetStream_v2");
    LOAD(lib, b->get_stream, "cublasGetStream_v2");
    LOAD(lib, b->set_pointer_mode, "cublasSetPointerMode_v2");
    LOAD(lib, b->get_pointer_mode, "cublasGetPointerMode_v2");
    LOAD(lib, b->set_workspace, "cublasSetWorkspace_v2");
    LOAD(lib, b->get_version, "cublasGetVersion_v2");
    LOAD(lib, b->get_property, "cublasGetProperty");
    LOAD(lib, b->status_name, "cublasGetStatusName");
    LOAD(lib, b->status_string, "cublasGetStatusString");
    LOAD(lib, b->sgemm, "cublasSgemm_v2");
    LOAD(lib, b->dgemm, "cublasDgemm_v2");
}

static double next_rand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 24) - 0.5;
}

/* Column-major reference GEMM in double precision. */
static void reference_gemm(int ta, int tb, int m, int n, int k, double alpha, const double *A,
                           int lda, const double *B, int ldb, double beta, double *C, int ldc) {
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            double sum = 0;
            for (int p = 0; p < k; ++p) {
                double a = ta ? A[p + i * lda] : A[i + p * lda];
                double b = tb ? B[j + p * ldb] : B[p + j * ldb];
                sum += a * b;
            }
            C[i + j * ldc] = alpha * sum + beta * C[i + j * ldc];
        }
}

static double absd(double v) { return v < 0 ? -v : v; }

enum { GM = 3, GN = 4, GK = 5, LDA = 7, LDB = 6, LDC = 5, ELEMS = 64 };

/* Run one Sgemm on the device and compare with the reference. */
static void check_sgemm(const struct cublas *b, cublasHandle_t h, int ta, int tb, uint32_t seed) {
    double A[ELEMS], B[ELEMS], C[ELEMS];
    float fA[ELEMS], fB[ELEMS], fC[ELEMS];
    for (int i = 0; i < ELEMS; ++i) {
        fA[i] = (float)next_rand(&seed);
        fB[i] = (float)next_rand(&seed);
        fC[i] = (float)next_rand(&seed);
        A[i] = fA[i];
        B[i] = fB[i];
        C[i] = fC[i];
    }
    CUdeviceptr dA = 0, dB = 0, dC = 0;
    CU(D.cuMemAlloc(&dA, sizeof fA));
    CU(D.cuMemAlloc(&dB, sizeof fB));
    CU(D.cuMemAlloc(&dC, sizeof fC));
    CU(D.cuMemcpyHtoDAsync(dA, fA, sizeof fA, NULL));
    CU(D.cuMemcpyHtoDAsync(dB, fB, sizeof fB, NULL));
    CU(D.cuMemcpyHtoDAsync(dC, fC, sizeof fC, NULL));
    float alpha = 1.5f, beta = -0.25f;
    assert_int_equal(
        b->sgemm(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, GM, GN, GK,
                 &alpha, (const float *)(uintptr_t)dA, LDA, (const float *)(uintptr_t)dB, LDB,
                 &beta, (float *)(uintptr_t)dC, LDC),
        CUBLAS_STATUS_SUCCESS);
    reference_gemm(ta, tb, GM, GN, GK, alpha, A, LDA, B, LDB, beta, C, LDC);
    alpha = 100.0f; /* host-mode scalars were read at the call */
    CU(D.cuMemcpyDtoHAsync(fC, dC, sizeof fC, NULL));
    /* rows GM..LDC-1 of C are padding and must be untouched */
    for (int j = 0; j < GN; ++j)
        for (int i = 0; i < LDC; ++i)
            assert_true(absd((double)fC[i + j * LDC] - C[i + j * LDC]) < 1e-5);
    CU(D.cuMemFree(dA));
    CU(D.cuMemFree(dB));
    CU(D.cuMemFree(dC));
}

static void test_cublas_gemm(void **state) {
    (void)state;
    NEED_DOUBLE();
    void *lib = open_companion("libcublas.so.13");
    struct cublas b;
    load_cublas(lib, &b);
    cublasHandle_t h = NULL;
    assert_int_equal(b.create(&h), CUBLAS_STATUS_NOT_INITIALIZED); /* no context */
    use_primary(0);
    assert_int_equal(b.create(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(T->tfd_live(TFD_CUBLAS_HANDLES), 1);
    int version = 0;
    assert_int_equal(b.get_version(h, &version), CUBLAS_STATUS_SUCCESS);
    assert_true(version >= 130000 && version < 140000);
    assert_int_equal(b.get_property(MAJOR_VERSION, &version), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(version, 13);
    assert_string_equal(b.status_name(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
    assert_non_null(b.status_string(CUBLAS_STATUS_EXECUTION_FAILED));

    for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) check_sgemm(&b, h, ta, tb, (uint32_t)(17 + 2 * ta + tb));

    /* Dgemm with alpha/beta in device memory */
    double hA[4] = {1, 2, 3, 4}, hB[4] = {5, 6, 7, 8}, hC[4] = {1, 1, 1, 1}, ab[2] = {2.0, 1.0};
    CUdeviceptr dA = 0, dB = 0, dC = 0, dab = 0;
    CU(D.cuMemAlloc(&dA, sizeof hA));
    CU(D.cuMemAlloc(&dB, sizeof hB));
    CU(D.cuMemAlloc(&dC, sizeof hC));
    CU(D.cuMemAlloc(&dab, sizeof ab));
    CU(D.cuMemcpyHtoDAsync(dA, hA, sizeof hA, NULL));
    CU(D.cuMemcpyHtoDAsync(dB, hB, sizeof hB, NULL));
    CU(D.cuMemcpyHtoDAsync(dC, hC, sizeof hC, NULL));
    CU(D.cuMemcpyHtoDAsync(dab, ab, sizeof ab, NULL));
    cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
    assert_int_equal(b.set_pointer_mode(h, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(b.get_pointer_mode(h, &mode), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(mode, CUBLAS_POINTER_MODE_DEVICE);
    const double *alpha_d = (const double *)(uintptr_t)dab, *beta_d = alpha_d + 1;
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, alpha_d, (const double *)(uintptr_t)dA, 2,
                (const double *)(uintptr_t)dB, 2, beta_d, (double *)(uintptr_t)dC, 2),
        CUBLAS_STATUS_SUCCESS);
    CU(D.cuMemcpyDtoHAsync(hC, dC, sizeof hC, NULL));
    /* A = [1 3; 2 4], B = [5 7; 6 8]: A*B = [23 31; 34 46]; 2*AB + 1 */
    assert_true(hC[0] == 47 && hC[1] == 69 && hC[2] == 63 && hC[3] == 93);
    /* Device-mode scalars are read when the GEMM runs: alpha set to 0 after
     * the call leaves C = 0 * AB + 1 * C. */
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, alpha_d, (const double *)(uintptr_t)dA, 2,
                (const double *)(uintptr_t)dB, 2, beta_d, (double *)(uintptr_t)dC, 2),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(T->tfd_pending(NULL), 1);
    double zero_alpha = 0.0;
    assert_int_equal(T->tfd_device_write(dab, &zero_alpha, sizeof zero_alpha), 0);
    CU(D.cuMemcpyDtoHAsync(hC, dC, sizeof hC, NULL));
    assert_true(hC[0] == 47 && hC[1] == 69 && hC[2] == 63 && hC[3] == 93);
    double host_alpha = 1.0;
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &host_alpha, (const double *)(uintptr_t)dA, 2,
                (const double *)(uintptr_t)dB, 2, beta_d, (double *)(uintptr_t)dC, 2),
        CUBLAS_STATUS_EXECUTION_FAILED);
    assert_int_equal(b.set_pointer_mode(h, (cublasPointerMode_t)5), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(b.set_pointer_mode(h, CUBLAS_POINTER_MODE_HOST), CUBLAS_STATUS_SUCCESS);

    /* argument checks */
    double one = 1.0, zero = 0.0;
    const double *pA = (const double *)(uintptr_t)dA, *pB = (const double *)(uintptr_t)dB;
    double *pC = (double *)(uintptr_t)dC;
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 2, &one, pA, 2, pB, 2, &zero, pC, 2),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, pA, 1, pB, 2, &zero, pC, 2),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 3, 2, 1, &one, pA, 1, pB, 1, &zero, pC, 2),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        b.dgemm(h, (cublasOperation_t)7, CUBLAS_OP_N, 2, 2, 2, &one, pA, 2, pB, 2, &zero, pC, 2),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, pA, 2, pB, 2, &zero, pC, 3),
        CUBLAS_STATUS_EXECUTION_FAILED); /* C runs past its allocation */
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, pA, 2, pB, 3, &zero, pC, 2),
        CUBLAS_STATUS_EXECUTION_FAILED); /* A too */
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 0, 2, 2, &one, pA, 2, pB, 2, &zero, NULL, 2),
        CUBLAS_STATUS_SUCCESS); /* nothing to do */
    assert_int_equal(
        b.dgemm(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, pA, 2, pB, 2, &zero, pC, 2),
        CUBLAS_STATUS_NOT_INITIALIZED);

    /* fault injection reaches the companion; "*" does not */
    T->tfd_fail("cublasDgemm_v2", 1, CUBLAS_STATUS_INTERNAL_ERROR, 1);
    T->tfd_fail("*", 1, CUDA_ERROR_UNKNOWN, 0);
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, pA, 2, pB, 2, &zero, pC, 2),
        CUBLAS_STATUS_INTERNAL_ERROR);
    assert_int_equal(
        b.dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, pA, 2, pB, 2, &zero, pC, 2),
        CUBLAS_STATUS_SUCCESS);
    T->tfd_clear_faults();
    assert_true(T->tfd_calls("cublasDgemm_v2") >= 2);

    CU(D.cuMemFree(dA));
    CU(D.cuMemFree(dB));
    CU(D.cuMemFree(dC));
    CU(D.cuMemFree(dab));
    assert_int_equal(b.destroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(b.destroy(h), CUBLAS_STATUS_NOT_INITIALIZED);
    dlclose(lib);
}

/* cublasGemmEx on float and double operands runs as the typed GEMMs; other
 * types are refused.  Math and atomics modes are checked and kept. */
static void test_cublas_gemm_ex_and_modes(void **state) {
    (void)state;
    NEED_DOUBLE();
    void *lib = open_companion("libcublas.so.13");
    struct cublas b;
    __typeof__(cublasGemmEx) *gemm_ex;
    __typeof__(cublasSetMathMode) *set_math;
    __typeof__(cublasGetMathMode) *get_math;
    __typeof__(cublasSetAtomicsMode) *set_atomics;
    load_cublas(lib, &b);
    LOAD(lib, gemm_ex, "cublasGemmEx");
    LOAD(lib, set_math, "cublasSetMathMode");
    LOAD(lib, get_math, "cublasGetMathMode");
    LOAD(lib, set_atomics, "cublasSetAtomicsMode");
    use_primary(0);
    cublasHandle_t h = NULL;
    assert_int_equal(b.create(&h), CUBLAS_STATUS_SUCCESS);
    float hA[4] = {1, 2, 3, 4}, hB[4] = {5, 6, 7, 8}, hC[4] = {0, 0, 0, 0}, one = 1, zero = 0;
    CUdeviceptr dA = 0, dB = 0, dC = 0;
    CU(D.cuMemAlloc(&dA, sizeof hA));
    CU(D.cuMemAlloc(&dB, sizeof hB));
    CU(D.cuMemAlloc(&dC, sizeof hC));
    CU(D.cuMemcpyHtoDAsync(dA, hA, sizeof hA, NULL));
    CU(D.cuMemcpyHtoDAsync(dB, hB, sizeof hB, NULL));
    const void *pA = (const void *)(uintptr_t)dA, *pB = (const void *)(uintptr_t)dB;
    void *pC = (void *)(uintptr_t)dC;
    const cublasComputeType_t computes[] = {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    for (int i = 0; i < 2; ++i) {
        assert_int_equal(
            gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, pA, CUDA_R_32F, 2, pB, CUDA_R_32F,
                    2, &zero, pC, CUDA_R_32F, 2, computes[i], CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
        CU(D.cuMemcpyDtoHAsync(hC, dC, sizeof hC, NULL));
        assert_true(hC[0] == 23 && hC[1] == 34 && hC[2] == 31 && hC[3] == 46);
        memset(hC, 0, sizeof hC);
    }
    assert_int_equal(
        gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, pA, CUDA_R_16F, 2, pB, CUDA_R_16F, 2,
                &zero, pC, CUDA_R_16F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        CUBLAS_STATUS_NOT_SUPPORTED);
    assert_int_equal(
        gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, pA, CUDA_R_32F, 2, pB, CUDA_R_32F, 2,
                &zero, pC, CUDA_R_32F, 2, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT),
        CUBLAS_STATUS_NOT_SUPPORTED);
    cublasMath_t math = CUBLAS_PEDANTIC_MATH;
    assert_int_equal(get_math(h, &math), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(math, CUBLAS_DEFAULT_MATH);
    assert_int_equal(set_math(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(get_math(h, &math), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(math, CUBLAS_TF32_TENSOR_OP_MATH);
    assert_int_equal(set_math(h, (cublasMath_t)64), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(set_atomics(h, CUBLAS_ATOMICS_ALLOWED), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(set_atomics(h, (cublasAtomicsMode_t)2), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(set_math(NULL, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
    CU(D.cuMemFree(dA));
    CU(D.cuMemFree(dB));
    CU(D.cuMemFree(dC));
    assert_int_equal(b.destroy(h), CUBLAS_STATUS_SUCCESS);
    dlclose(lib);
}

/* ---- cuBLASLt ------------------------------------------------------------------- */

struct cublaslt {
    __typeof__(cublasLtCreate) *create;
    __typeof__(cublasLtDestroy) *destroy;
    __typeof__(cublasLtMatmulDescCreate) *desc_create;
    __typeof__(cublasLtMatmulDescDestroy) *desc_destroy;
    __typeof__(cublasLtMatmulDescSetAttribute) *desc_set;
    __typeof__(cublasLtMatrixLayoutCreate) *layout_create;
    __typeof__(cublasLtMatrixLayoutDestroy) *layout_destroy;
    __typeof__(cublasLtMatmulPreferenceCreate) *pref_create;
    __typeof__(cublasLtMatmulPreferenceDestroy) *pref_destroy;
    __typeof__(cublasLtMatmulPreferenceSetAttribute) *pref_set;
    __typeof__(cublasLtMatmulAlgoGetHeuristic) *heuristic;
    __typeof__(cublasLtMatmul) *matmul;
};

static void load_cublaslt(void *lib, struct cublaslt *l) {
    LOAD(lib, l->create, "cublasLtCreate");
    LOAD(lib, l->destroy, "cublasLtDestroy");
    LOAD(lib, l->desc_create, "cublasLtMatmulDescCreate");
    LOAD(lib, l->desc_destroy, "cublasLtMatmulDescDestroy");
    LOAD(lib, l->desc_set, "cublasLtMatmulDescSetAttribute");
    LOAD(lib, l->layout_create, "cublasLtMatrixLayoutCreate");
    LOAD(lib, l->layout_destroy, "cublasLtMatrixLayoutDestroy");
    LOAD(lib, l->pref_create, "cublasLtMatmulPreferenceCreate");
    LOAD(lib, l->pref_destroy, "cublasLtMatmulPreferenceDestroy");
    LOAD(lib, l->pref_set, "cublasLtMatmulPreferenceSetAttribute");
    LOAD(lib, l->heuristic, "cublasLtMatmulAlgoGetHeuristic");
    LOAD(lib, l->matmul, "cublasLtMatmul");
}

/* cublasLtMatmul computes D = alpha op(A) op(B) + beta C when its stream runs
 * it, on a cuBLASLt handle or a cuBLAS one; what the double does not model
 * is refused, never computed wrongly. */
static void test_cublaslt_matmul(void **state) {
    (void)state;
    NEED_DOUBLE();
    void *lib = open_companion("libcublasLt.so.13"), *blas = open_companion("libcublas.so.13");
    struct cublaslt l;
    struct cublas b;
    load_cublaslt(lib, &l);
    load_cublas(blas, &b);
    use_primary(0);
    cublasLtHandle_t h = NULL;
    cublasHandle_t bh = NULL;
    assert_int_equal(l.create(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(b.create(&bh), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t lay = NULL, wide = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    const int32_t trans = CUBLAS_OP_T, device_mode = CUBLASLT_POINTER_MODE_DEVICE;
    const uint64_t ws = 1024;
    assert_int_equal(l.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        l.desc_set(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &device_mode, sizeof device_mode),
        CUBLAS_STATUS_NOT_SUPPORTED);
    assert_int_equal(l.layout_create(&lay, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.layout_create(&wide, CUDA_R_32F, 2, 3, 2), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.layout_create(&wide, CUDA_R_32F, 3, 2, 2), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(l.pref_create(&pref), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                     CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    assert_int_equal(l.heuristic(h, desc, lay, lay, lay, lay, pref, 1, &r, &found),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(found, 1);
    assert_int_equal(r.state, CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.heuristic(h, desc, wide, lay, lay, lay, pref, 1, &r, &found),
                     CUBLAS_STATUS_INVALID_VALUE); /* op(A) is 3 x 2 */

    float hA[4] = {1, 2, 3, 4}, hB[4] = {5, 6, 7, 8}, hC[4] = {1, 1, 1, 1}, hD[4] = {0};
    CUdeviceptr dA = 0, dB = 0, dC = 0, dD = 0, dW = 0;
    CU(D.cuMemAlloc(&dA, sizeof hA));
    CU(D.cuMemAlloc(&dB, sizeof hB));
    CU(D.cuMemAlloc(&dC, sizeof hC));
    CU(D.cuMemAlloc(&dD, sizeof hD));
    CU(D.cuMemAlloc(&dW, ws));
    CU(D.cuMemcpyHtoDAsync(dA, hA, sizeof hA, NULL));
    CU(D.cuMemcpyHtoDAsync(dB, hB, sizeof hB, NULL));
    CU(D.cuMemcpyHtoDAsync(dC, hC, sizeof hC, NULL));
    const float two = 2, one = 1;
    const void *pA = (const void *)(uintptr_t)dA, *pB = (const void *)(uintptr_t)dB,
               *pC = (const void *)(uintptr_t)dC;
    void *pD = (void *)(uintptr_t)dD, *pW = (void *)(uintptr_t)dW;
    /* on the cuBLAS handle: D = 2 A^T B + C; A^T = [1 2; 3 4], B = [5 7; 6 8] */
    const int queued = T->tfd_pending(NULL);
    assert_int_equal(l.matmul((cublasLtHandle_t)bh, desc, &two, pA, lay, pB, lay, &one, pC, lay, pD,
                              lay, &r.algo, pW, ws, NULL),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(T->tfd_pending(NULL), queued + 1); /* queued, not run */
    CU(D.cuMemcpyDtoHAsync(hD, dD, sizeof hD, NULL));
    assert_true(hD[0] == 35 && hD[1] == 79 && hD[2] == 47 && hD[3] == 107);
    /* the workspace must be device memory */
    assert_int_equal(l.matmul(h, desc, &two, pA, lay, pB, lay, &one, pC, lay, pD, lay, &r.algo, hD,
                              sizeof hD, NULL),
                     CUBLAS_STATUS_INVALID_VALUE);
    /* operands must be device memory */
    assert_int_equal(
        l.matmul(h, desc, &two, hA, lay, pB, lay, &one, pC, lay, pD, lay, &r.algo, NULL, 0, NULL),
        CUBLAS_STATUS_EXECUTION_FAILED);
    cublasLtMatmulDesc_t half = NULL;
    assert_int_equal(l.desc_create(&half, CUBLAS_COMPUTE_16F, CUDA_R_16F), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.heuristic(h, half, lay, lay, lay, lay, pref, 1, &r, &found),
                     CUBLAS_STATUS_NOT_SUPPORTED);
    assert_int_equal(l.desc_destroy(half), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.desc_destroy(half), CUBLAS_STATUS_INVALID_VALUE); /* already gone */
    T->tfd_fail("cublasLtMatmul", 1, CUBLAS_STATUS_INTERNAL_ERROR, 1);
    assert_int_equal(
        l.matmul(h, desc, &two, pA, lay, pB, lay, &one, pC, lay, pD, lay, &r.algo, NULL, 0, NULL),
        CUBLAS_STATUS_INTERNAL_ERROR);
    T->tfd_clear_faults();

    assert_int_equal(l.pref_destroy(pref), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.layout_destroy(lay), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.layout_destroy(wide), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.desc_destroy(desc), CUBLAS_STATUS_SUCCESS);
    CU(D.cuMemFree(dA));
    CU(D.cuMemFree(dB));
    CU(D.cuMemFree(dC));
    CU(D.cuMemFree(dD));
    CU(D.cuMemFree(dW));
    assert_int_equal(b.destroy(bh), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.destroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(l.destroy(h), CUBLAS_STATUS_NOT_INITIALIZED);
    dlclose(blas);
    dlclose(lib);
}

static void test_cublas_stream_workspace(void **state) {
    (void)state;
    NEED_DOUBLE();
    void *lib = open_companion("libcublas.so.13");
    struct cublas b;
    load_cublas(lib, &b);
    CUcontext c = use_primary(0);
    cublasHandle_t h = NULL;
    assert_int_equal(b.create(&h), CUBLAS_STATUS_SUCCESS);
    CUstream s = NULL;
    CU(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr ws = 0, dm = 0;
    CU(D.cuMemAlloc(&ws, 1 << 20));
    CU(D.cuMemAlloc(&dm, 4 * sizeof(float)));
    assert_int_equal(b.set_workspace(h, (void *)(uintptr_t)ws, 1 << 20), CUBLAS_STATUS_SUCCESS);
    void *wp = NULL;
    size_t wsize = 0;
    assert_int_equal(T->tfd_cublas_workspace(h, &wp, &wsize), 0);
    assert_ptr_equal(wp, (void *)(uintptr_t)ws);
    assert_int_equal(wsize, 1 << 20);
    assert_int_equal(b.set_workspace(h, (void *)(uintptr_t)(ws + 4), 1024),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(b.set_workspace(h, (void *)(uintptr_t)ws, (2 << 20)),
                     CUBLAS_STATUS_INVALID_VALUE);
    /* setting the stream resets the workspace, as in real cuBLAS */
    assert_int_equal(b.set_stream(h, (cudaStream_t)s), CUBLAS_STATUS_SUCCESS);
    cudaStream_t got = NULL;
    assert_int_equal(b.get_stream(h, &got), CUBLAS_STATUS_SUCCESS);
    assert_ptr_equal(got, s);
    assert_ptr_equal(T->tfd_cublas_stream(h), s);
    assert_int_equal(T->tfd_cublas_workspace(h, &wp, &wsize), 0);
    assert_null(wp);
    assert_int_equal(wsize, 0);

    float one = 1.0f, zero = 0.0f;
    const float *p = (const float *)(uintptr_t)dm;
    assert_int_equal(b.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 1, &one, p, 2, p, 1, &zero,
                             (float *)(uintptr_t)dm, 2),
                     CUBLAS_STATUS_SUCCESS);
    struct tfd_cublas_info info;
    assert_int_equal(T->tfd_cublas_get(h, &info), 0);
    assert_ptr_equal(info.last_stream, s);
    assert_ptr_equal(info.context, c);
    assert_int_equal(info.gemms, 1);
    assert_int_equal(T->tfd_cublas_get((void *)0x10, &info), -1);

    /* the handle's context must be current */
    void *other = T->tfd_create_context(0);
    T->tfd_set_current(other);
    assert_int_equal(b.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 1, &one, p, 2, p, 1, &zero,
                             (float *)(uintptr_t)dm, 2),
                     CUBLAS_STATUS_EXECUTION_FAILED);
    T->tfd_set_current(c);
    T->tfd_destroy_context(other);
    /* and not poisoned */
    T->tfd_poison_context(c, CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(b.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 1, &one, p, 2, p, 1, &zero,
                             (float *)(uintptr_t)dm, 2),
                     CUBLAS_STATUS_EXECUTION_FAILED);
    T->tfd_poison_context(c, 0);

    assert_int_equal(b.destroy(h), CUBLAS_STATUS_SUCCESS);
    CU(D.cuStreamDestroy(s));
    CU(D.cuMemFree(ws));
    CU(D.cuMemFree(dm));
    dlclose(lib);
}

static void test_cublas12(void **state) {
    (void)state;
    NEED_DOUBLE();
    const char *path = double_link_path();
    assert_non_null(path);
    char dir[4096], lib12[4200];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(lib12, sizeof lib12, "%s/../double12/libcublas.so.12", dirname(dir));
    if (access(lib12, R_OK) != 0) skip();
    void *lib = dlopen(lib12, RTLD_NOW);
    assert_non_null(lib);
    struct cublas b;
    load_cublas(lib, &b);
    int version = 0;
    assert_int_equal(b.get_version(NULL, &version), CUBLAS_STATUS_SUCCESS);
    assert_true(version >= 120000 && version < 130000);
    use_primary(0);
    cublasHandle_t h = NULL;
    assert_int_equal(b.create(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(T->tfd_live(TFD_CUBLAS_HANDLES), 1); /* one shared state */
    assert_int_equal(b.destroy(h), CUBLAS_STATUS_SUCCESS);
    dlclose(lib);
}

/* ---- NVRTC ------------------------------------------------------------------------- */

struct nvrtc {
    __typeof__(nvrtcVersion) *version;
    __typeof__(nvrtcGetErrorString) *error_string;
    __typeof__(nvrtcCreateProgram) *create;
    __typeof__(nvrtcDestroyProgram) *destroy;
    __typeof__(nvrtcCompileProgram) *compile;
    __typeof__(nvrtcGetProgramLogSize) *log_size;
    __typeof__(nvrtcGetProgramLog) *log;
    __typeof__(nvrtcGetPTXSize) *ptx_size;
    __typeof__(nvrtcGetPTX) *ptx;
    __typeof__(nvrtcGetCUBINSize) *cubin_size;
    __typeof__(nvrtcGetCUBIN) *cubin;
};

static void load_nvrtc(void *lib, struct nvrtc *r) {
    LOAD(lib, r->version, "nvrtcVersion");
    LOAD(lib, r->error_string, "nvrtcGetErrorString");
    LOAD(lib, r->create, "nvrtcCreateProgram");
    LOAD(lib, r->destroy, "nvrtcDestroyProgram");
    LOAD(lib, r->compile, "nvrtcCompileProgram");
    LOAD(lib, r->log_size, "nvrtcGetProgramLogSize");
    LOAD(lib, r->log, "nvrtcGetProgramLog");
    LOAD(lib, r->ptx_size, "nvrtcGetPTXSize");
    LOAD(lib, r->ptx, "nvrtcGetPTX");
    LOAD(lib, r->cubin_size, "nvrtcGetCUBINSize");
    LOAD(lib, r->cubin, "nvrtcGetCUBIN");
}

/* The program's log, PTX or CUBIN in a malloc'ed string. */
static char *fetch(nvrtcResult (*size_fn)(nvrtcProgram, size_t *),
                   nvrtcResult (*get_fn)(nvrtcProgram, char *), nvrtcProgram p) {
    size_t n = 0;
    assert_int_equal(size_fn(p, &n), NVRTC_SUCCESS);
    char *s = malloc(n);
    assert_non_null(s);
    assert_int_equal(get_fn(p, s), NVRTC_SUCCESS);
    assert_int_equal(strlen(s) + 1, n);
    return s;
}

static const char kSource[] =
    "extern \"C\" __global__ void tfd_fill_u32(unsigned long long p, unsigned v, unsigned n) "
    "{}\n"
    "__global__ void mangled(int x) { }\n"
    "extern \"C\" {\n"
    "__global__ void __launch_bounds__(256) tfd_add_f32(float *x) { if (x) { } }\n"
    "}\n"
    "// __global__ void commented(int x) {}\n"
    "/* __global__ void also_commented(int x) {} */\n";

static void test_nvrtc_compile(void **state) {
    (void)state;
    NEED_DOUBLE();
    void *lib = open_companion("libnvrtc.so.13");
    struct nvrtc r;
    load_nvrtc(lib, &r);
    int major = 0, minor = -1;
    assert_int_equal(r.version(&major, &minor), NVRTC_SUCCESS);
    assert_int_equal(major, 13);
    assert_int_equal(minor, 0);

    nvrtcProgram p = NULL;
    assert_int_equal(r.create(&p, kSource, "k.cu", 0, NULL, NULL), NVRTC_SUCCESS);
    assert_int_equal(T->tfd_live(TFD_NVRTC_PROGRAMS), 1);
    const char *virt[] = {"--gpu-architecture=compute_80", "-default-device", "--std=c++17"};
    assert_int_equal(r.compile(p, 3, virt), NVRTC_SUCCESS);
    char *ptx = fetch(r.ptx_size, r.ptx, p);
    assert_non_null(strstr(ptx, ".version 8.0"));
    assert_non_null(strstr(ptx, ".target sm_80"));
    assert_non_null(strstr(ptx, ".visible .entry tfd_fill_u32("));
    assert_non_null(strstr(ptx, ".visible .entry tfd_add_f32("));
    assert_non_null(strstr(ptx, ".visible .entry _Z7mangledv("));
    assert_null(strstr(ptx, "commented"));
    free(ptx);
    char *log = fetch(r.log_size, r.log, p);
    assert_string_equal(log, "");
    free(log);
    size_t n = 0;
    assert_int_equal(r.cubin_size(p, &n), NVRTC_ERROR_INVALID_OPTION);

    const char *real[] = {"-arch", "sm_90"};
    assert_int_equal(r.compile(p, 2, real), NVRTC_SUCCESS);
    char *cubin = fetch(r.cubin_size, r.cubin, p);
    assert_non_null(strstr(cubin, ".target sm_90"));
    /* the output loads as a module, and its kernels run */
    use_primary(0);
    CUmodule m = NULL;
    CUfunction f = NULL;
    char err[128];
    CU(load(&m, cubin, err, sizeof err));
    free(cubin);
    CU(D.cuModuleGetFunction(&f, m, "tfd_fill_u32"));
    assert_int_equal(D.cuModuleGetFunction(&f, m, "mangled"), CUDA_ERROR_NOT_FOUND);
    CU(D.cuModuleUnload(m));

    assert_int_equal(r.compile(p, 0, NULL), NVRTC_SUCCESS); /* default target */
    ptx = fetch(r.ptx_size, r.ptx, p);
    assert_non_null(strstr(ptx, ".target sm_90"));
    free(ptx);

    const char *bad_arch[] = {"-arch=sm_12"};
    assert_int_equal(r.compile(p, 1, bad_arch), NVRTC_ERROR_INVALID_OPTION);
    log = fetch(r.log_size, r.log, p);
    assert_non_null(strstr(log, "gpu-architecture"));
    free(log);
    assert_int_equal(r.ptx_size(p, &n), NVRTC_ERROR_INVALID_PROGRAM);
    const char *bogus[] = {"bogus"};
    assert_int_equal(r.compile(p, 1, bogus), NVRTC_ERROR_INVALID_OPTION);
    assert_int_equal(r.compile(p, 1, NULL), NVRTC_ERROR_INVALID_INPUT);

    T->tfd_fail("nvrtcCompileProgram", 1, NVRTC_ERROR_OUT_OF_MEMORY, 1);
    assert_int_equal(r.compile(p, 0, NULL), NVRTC_ERROR_OUT_OF_MEMORY);
    assert_int_equal(r.compile(p, 0, NULL), NVRTC_SUCCESS);

    assert_int_equal(r.destroy(&p), NVRTC_SUCCESS);
    assert_null(p);
    assert_int_equal(r.destroy(&p), NVRTC_ERROR_INVALID_PROGRAM);
    assert_int_equal(T->tfd_live(TFD_NVRTC_PROGRAMS), 0);
    dlclose(lib);
}

static void test_nvrtc_errors(void **state) {
    (void)state;
    NEED_DOUBLE();
    void *lib = open_companion("libnvrtc.so.13");
    struct nvrtc r;
    load_nvrtc(lib, &r);
    static const char src[] =
        "#include <x.h>\n"
        "  #  error  this is broken\n"
        "__global__ void k() {}\n"
        "#error second\n"
        "#errorless is not a directive\n";
    nvrtcProgram p = NULL, q = NULL;
    assert_int_equal(r.create(&p, src, "bad.cu", 0, NULL, NULL), NVRTC_SUCCESS);
    assert_int_equal(r.compile(p, 0, NULL), NVRTC_ERROR_COMPILATION);
    char *log = fetch(r.log_size, r.log, p);
    assert_non_null(strstr(log, "bad.cu(2): error: this is broken\n"));
    assert_non_null(strstr(log, "bad.cu(4): error: second\n"));
    assert_null(strstr(log, "(5)"));
    free(log);
    size_t n = 0;
    assert_int_equal(r.ptx_size(p, &n), NVRTC_ERROR_INVALID_PROGRAM);
    assert_int_equal(r.create(&q, "#error x\n", NULL, 0, NULL, NULL), NVRTC_SUCCESS);
    assert_int_equal(r.compile(q, 0, NULL), NVRTC_ERROR_COMPILATION);
    log = fetch(r.log_size, r.log, q);
    assert_non_null(strstr(log, "default_program(1): error: x"));
    free(log);
    assert_int_equal(T->tfd_live(TFD_NVRTC_PROGRAMS), 2);

    nvrtcProgram none = NULL;
    assert_int_equal(r.create(NULL, src, "x", 0, NULL, NULL), NVRTC_ERROR_INVALID_PROGRAM);
    assert_int_equal(r.create(&none, NULL, "x", 0, NULL, NULL), NVRTC_ERROR_INVALID_INPUT);
    assert_int_equal(r.create(&none, src, "x", -1, NULL, NULL), NVRTC_ERROR_INVALID_INPUT);
    assert_null(none);
    assert_int_equal(r.compile((nvrtcProgram)(uintptr_t)0x40, 0, NULL),
                     NVRTC_ERROR_INVALID_PROGRAM);
    assert_string_equal(r.error_string(NVRTC_ERROR_COMPILATION), "NVRTC_ERROR_COMPILATION");
    assert_string_equal(r.error_string((nvrtcResult)99), "NVRTC_ERROR unknown");
    assert_true(T->tfd_calls("nvrtcGetErrorString") == 2);
    assert_int_equal(r.destroy(&p), NVRTC_SUCCESS);
    assert_int_equal(T->tfd_live(TFD_NVRTC_PROGRAMS), 1);
    assert_int_equal(r.destroy(&q), NVRTC_SUCCESS);
    assert_int_equal(r.destroy(&none), NVRTC_ERROR_INVALID_PROGRAM);
    assert_int_equal(r.destroy(NULL), NVRTC_ERROR_INVALID_PROGRAM);
    dlclose(lib);
}

/* ---- threads ------------------------------------------------------------------------- */

enum { THREADS = 4, ROUNDS = 200 };

/* Each thread works on its own stream; another thread's cuMemFree may run
 * it at any time (it drains the device), so only synchronized states are
 * checked. */
static void *worker(void *arg) {
    CUcontext c = arg;
    if (D.cuCtxSetCurrent(c) != CUDA_SUCCESS) return (void *)1;
    for (int i = 0; i < ROUNDS; ++i) {
        CUdeviceptr p = 0;
        CUstream s = NULL;
        CUevent e = NULL;
        unsigned char in[256], out[256];
        memset(in, i, sizeof in);
        if (D.cuMemAlloc(&p, sizeof in) != CUDA_SUCCESS ||
            D.cuStreamCreate(&s, 0) != CUDA_SUCCESS || D.cuEventCreate(&e, 0) != CUDA_SUCCESS)
            return (void *)2;
        if (D.cuMemcpyHtoDAsync(p, in, sizeof in, s) != CUDA_SUCCESS ||
            D.cuMemcpyDtoHAsync(out, p, sizeof out, s) != CUDA_SUCCESS ||
            D.cuEventRecord(e, s) != CUDA_SUCCESS || D.cuEventSynchronize(e) != CUDA_SUCCESS ||
            D.cuEventQuery(e) != CUDA_SUCCESS)
            return (void *)3;
        if (memcmp(in, out, sizeof in) != 0) return (void *)4;
        if (D.cuEventDestroy(e) != CUDA_SUCCESS || D.cuStreamDestroy(s) != CUDA_SUCCESS ||
            D.cuMemFree(p) != CUDA_SUCCESS)
            return (void *)5;
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    NEED_DOUBLE();
    CUcontext c = use_primary(0);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; ++i) assert_int_equal(pthread_create(&th[i], NULL, worker, c), 0);
    for (int i = 0; i < THREADS; ++i) {
        void *ret = (void *)9;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
    assert_int_equal(T->tfd_calls("cuMemAlloc"), THREADS * ROUNDS);
    assert_int_equal(T->tfd_live(TFD_STREAMS), 0);
    assert_int_equal(T->tfd_live(TFD_EVENTS), 0);
    assert_int_equal(T->tfd_live(TFD_DEVICE_ALLOCS), 0);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, double_selftest_setup, double_selftest_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_proc_address),
        TEST(test_init_rules),
        TEST(test_devices),
        TEST(test_fault_nth_times),
        TEST(test_fault_after),
        TEST(test_fault_wildcard),
        TEST(test_entry_delay),
        TEST(test_call_log),
        TEST(test_primary_context),
        TEST(test_foreign_context),
        TEST(test_reclaim_on_release),
        TEST(test_page_locked_memory_goes_with_its_context),
        TEST(test_memory_layout),
        TEST(test_memory_copies),
        TEST(test_host_and_async_memory),
        TEST(test_memory_pools),
        TEST(test_stream_mem_ops_switch),
        TEST(test_peer),
        TEST(test_event_pending),
        TEST(test_sticky_poison),
        TEST(test_module_load),
        TEST(test_kernels),
        TEST(test_error_names),
        TEST(test_cublas_gemm),
        TEST(test_cublas_gemm_ex_and_modes),
        TEST(test_cublaslt_matmul),
        TEST(test_cublas_stream_workspace),
        TEST(test_cublas12),
        TEST(test_nvrtc_compile),
        TEST(test_nvrtc_errors),
        TEST(test_threads),
    };
    return cmocka_run_group_tests_name("cuda_double", tests, group_setup, NULL);
}
