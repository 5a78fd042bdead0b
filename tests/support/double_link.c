/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Run-time link to the CUDA driver double's control interface; see
 * double_link.h. */
#include "double_link.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

static struct tfd_api g_api;
static const struct tfd_api *g_result;
static const char *g_path;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The libcuda.so.1 already in the process, else the one the loader finds.
 * The handle is kept open for the life of the process. */
static void *open_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) h = dlopen("libcuda.so.1", RTLD_NOW);
    return h;
}

/* Store dlsym(h, name) into the function pointer at `slot` (ISO C has no
 * conversion from void * to a function pointer, so copy the bits). */
static int resolve(void *h, const char *name, void *slot, size_t size) {
    void *sym = dlsym(h, name);
    if (sym == NULL || size != sizeof sym) return 0;
    memcpy(slot, &sym, sizeof sym);
    return 1;
}

static void load(void) {
    void *h = open_driver();
    if (h == NULL) return;
    int ok = 1;
#define TFD_API_RESOLVE(name) \
    ok &= resolve(h, "tfd_" #name, &g_api.tfd_##name, sizeof g_api.tfd_##name);
    TFD_API_FUNCTIONS(TFD_API_RESOLVE)
#undef TFD_API_RESOLVE
    if (!ok) return; /* the real driver, or not the double this header expects */
    Dl_info info;
    void *reset = NULL;
    memcpy(&reset, &g_api.tfd_reset, sizeof reset);
    if (dladdr(reset, &info) != 0) g_path = info.dli_fname;
    g_result = &g_api;
}

const struct tfd_api *tfd(void) {
    pthread_once(&g_once, load);
    return g_result;
}

const char *double_link_path(void) {
    pthread_once(&g_once, load);
    return g_path;
}
