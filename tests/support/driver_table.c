/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The driver's entry points for the double's self-tests; see driver_table.h. */
#include "support/driver_table.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "support/double_link.h"

static struct driver_table g_table;
static const struct driver_table *g_result;
static PFN_cuGetProcAddress_v12000 g_get_proc;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int resolve(const char *name, int version, void *slot) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (g_get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS) return 0;
    memcpy(slot, &fn, sizeof fn);
    return 1;
}

static void load(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL) lib = dlopen("libcuda.so.1", RTLD_NOW);
    void *sym = lib != NULL ? dlsym(lib, "cuGetProcAddress_v2") : NULL;
    if (sym == NULL) return;
    memcpy(&g_get_proc, &sym, sizeof sym);
    int ok = 1;
#define TF_DRIVER_ENTRY(name, version) ok &= resolve(#name, version, &g_table.name);
#include "../../src/driver/driver_entries.inc"
#include "../cuda_double/extra_entries.inc"
#undef TF_DRIVER_ENTRY
    if (ok) g_result = &g_table;
}

const struct driver_table *driver_table(void) {
    pthread_once(&g_once, load);
    return g_result;
}

PFN_cuGetProcAddress_v12000 driver_get_proc(void) {
    pthread_once(&g_once, load);
    return g_get_proc;
}

int double_selftest_setup(void **state) {
    const struct tfd_api *t = tfd();
    (void)state;
    if (t == NULL) return 0;
    t->tfd_reset();
    t->tfd_set_current(NULL);
    t->tfd_set_initialized(1);
    return 0;
}

int double_selftest_teardown(void **state) {
    const struct tfd_api *t = tfd();
    const struct driver_table *d = driver_table();
    (void)state;
    if (t == NULL || d == NULL) return 0;
    t->tfd_set_current(NULL);
    t->tfd_reset();
    t->tfd_set_devices(8);
    t->tfd_set_initialized(1);
    for (int dev = 0; dev < 8; ++dev)
        while (t->tfd_primary_refcount(dev) > 0) d->cuDevicePrimaryCtxRelease(dev);
    t->tfd_reset();
    for (int k = 0; k < TFD_KIND_COUNT; ++k) {
        if (t->tfd_live(k) != 0) {
            fprintf(stderr, "test leaked %ld objects of kind %d\n", t->tfd_live(k), k);
            return -1;
        }
    }
    return 0;
}
