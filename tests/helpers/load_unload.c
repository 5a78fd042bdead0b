/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Loads and unloads libtenferro_gpu.so.1 100 times in one process, creating
 * and releasing a runtime each time, and fails if the library is not really
 * unloaded or the resident memory keeps growing.  Built without linking the
 * library (that would pin it); run by tests/test_process_lifecycle.c. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int32_t (*new_fn)(int32_t, void **);
typedef int32_t (*ctx_fn)(void *, int32_t (*)(void *), void *);
typedef int32_t (*release_fn)(void *);
typedef const char *(*message_fn)(void);

static int32_t noop(void *user_data) {
    (void)user_data;
    return 0;
}

static long resident_kib(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident * 4;
}

/* Holds device 0's primary context for the whole run, through the driver
 * the library loads.  Otherwise every cycle's release would destroy the
 * context and the next create it again, and the driver's own memory churn
 * for that would be counted as the library's. */
static int hold_primary_context(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    PFN_cuGetProcAddress_v12000 gpa;
    PFN_cuInit_v2000 init;
    PFN_cuDeviceGet_v2000 get;
    PFN_cuDevicePrimaryCtxRetain_v7000 retain;
    CUdevice dev;
    CUcontext ctx;
    if (!cuda) return 1;
    *(void **)&gpa = dlsym(cuda, "cuGetProcAddress_v2");
    if (!gpa || gpa("cuInit", (void **)&init, 2000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL) ||
        gpa("cuDeviceGet", (void **)&get, 2000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL) ||
        gpa("cuDevicePrimaryCtxRetain", (void **)&retain, 7000, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
            NULL))
        return 1;
    return init(0) || get(&dev, 0) || retain(&ctx, dev);
}

/* Against the driver double, its call log (test bookkeeping) would grow with
 * every cycle; clear it so only the library's memory is measured. */
static void forget_double_log(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void (*clear)(void) = NULL;
    if (!cuda) return;
    *(void **)&clear = dlsym(cuda, "tfd_log_clear");
    if (clear) clear();
    dlclose(cuda);
}

static int cycle(const char *path, int check_unloaded) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL), *rt = NULL;
    new_fn rt_new;
    ctx_fn with_context;
    release_fn release;
    message_fn message;
    if (!lib) {
        fprintf(stderr, "load_unload: dlopen %s: %s\n", path, dlerror());
        return 1;
    }
    *(void **)&rt_new = dlsym(lib, "tf_runtime_new");
    *(void **)&with_context = dlsym(lib, "tf_with_context");
    *(void **)&release = dlsym(lib, "tf_runtime_release");
    *(void **)&message = dlsym(lib, "tf_last_error_message");
    if (!rt_new || !with_context || !release || !message) return 1;
    if (rt_new(0, &rt) != 0 || with_context(rt, noop, NULL) != 0 || release(rt) != 0) {
        fprintf(stderr, "load_unload: %s\n", message());
        return 1;
    }
    if (dlclose(lib) != 0) return 1;
    forget_double_log();
    if (check_unloaded && dlopen(path, RTLD_NOW | RTLD_NOLOAD)) {
        fprintf(stderr, "load_unload: the library stayed loaded after dlclose\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    long after_warmup = 0, after_all;
    int i, cycles = argc > 2 ? atoi(argv[2]) : 100;
    if (argc < 2) return 2;
    if (hold_primary_context() != 0) {
        fprintf(stderr, "load_unload: cannot retain device 0's primary context\n");
        return 1;
    }
    for (i = 0; i < cycles; ++i) {
        if (cycle(argv[1], i == 0) != 0) return 1;
        if (i == 9) after_warmup = resident_kib();
    }
    after_all = resident_kib();
    printf("resident after 10 cycles: %ld KiB, after %d: %ld KiB\n", after_warmup, cycles,
           after_all);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* Sanitizers keep freed memory in quarantine: resident size says nothing. */
    return 0;
#else
    /* The cycles after the first ten may not grow the process by 1 MiB. */
    return after_all - after_warmup > 1024 ? 1 : 0;
#endif
}
