// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/driver_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>

#include "driver/cuda_status.h"
#include "driver/load_once.h"
#include "util/env.h"
#include "util/error.h"

namespace tf {
namespace {

// Zero-initialised; filled once by open_driver_api() under the driver's
// LoadOnce (fork-safe), read-only afterwards.
DriverApi g_api;
std::atomic<bool> g_initialized{false};
// The override path that loaded, "" otherwise; written with g_api.
char g_override[512];

struct LoadResult {
    const DriverApi *api;
    tf_status status;
    const char *call;  // what failed: "dlopen", "dlsym", "cuGetProcAddress", ...
    char detail[400];
};

LoadResult refuse(tf_status status, const char *call, const char *fmt, const char *arg) {
    LoadResult r{nullptr, status, call, {0}};
    std::snprintf(r.detail, sizeof r.detail, fmt, arg);
    return r;
}

void *open_driver(LoadResult *failure) {
    bool rejected = false;
    const char *path = library_override(kDriverPathEnv, &rejected);
    if (rejected) {
        *failure = refuse(TF_ERROR_DRIVER_NOT_FOUND, "secure_getenv",
                          "%s must be an absolute path; it was ignored and nothing loaded",
                          kDriverPathEnv);
        return nullptr;
    }
    void *handle = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle && path) std::snprintf(g_override, sizeof g_override, "%s", path);
    if (!handle) {
        const char *why = dlerror();
        *failure = refuse(TF_ERROR_DRIVER_NOT_FOUND, "dlopen",
                          "cannot load the CUDA driver libcuda.so.1 (%s); install the NVIDIA "
                          "driver or add the folder that holds libcuda.so.1 to LD_LIBRARY_PATH",
                          why ? why : "unknown reason");
    }
    return handle;
}

LoadResult open_driver_api() {
    LoadResult failure{};
    void *handle = open_driver(&failure);
    if (!handle) return failure;
    auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(handle, "cuGetProcAddress_v2"));
    if (!gpa)
        return refuse(TF_ERROR_DRIVER_TOO_OLD, "dlsym", "%s",
                      "the CUDA driver has no cuGetProcAddress_v2; a driver for CUDA 12.0 or "
                      "newer is required");
    bool stub = false;
    // Flags: legacy default-stream semantics; the library only uses explicit streams.
#define TF_DRIVER_ENTRY(name, version)                                                    \
    {                                                                                     \
        void *fn = nullptr;                                                               \
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;               \
        CUresult r = gpa(#name, &fn, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found); \
        if (r == CUDA_ERROR_STUB_LIBRARY) stub = true;                                    \
        if (r == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS)                    \
            g_api.name = reinterpret_cast<PFN_##name##_v##version>(fn);                   \
    }
#include "driver/driver_entries.inc"
#undef TF_DRIVER_ENTRY
    if (stub)
        return refuse(TF_ERROR_DRIVER_STUB, "cuGetProcAddress", "%s",
                      "the loaded libcuda.so.1 is the CUDA toolkit's stub library, not a "
                      "driver; install the NVIDIA driver and make sure its libcuda.so.1 is "
                      "found before the toolkit's stubs folder");
    // cuGetProcAddress_v2 already implies CUDA 12.0; a driver that cannot
    // tell its version is used as such (driver_version stays 0).
    if (g_api.cuDriverGetVersion &&
        g_api.cuDriverGetVersion(&g_api.driver_version) == CUDA_SUCCESS &&
        g_api.driver_version < 12000) {
        char version[32];
        std::snprintf(version, sizeof version, "%d", g_api.driver_version);
        return refuse(TF_ERROR_DRIVER_TOO_OLD, "cuDriverGetVersion",
                      "the CUDA driver supports CUDA %s; CUDA 12.0 (12000) or newer is "
                      "required",
                      version);
    }
    return LoadResult{&g_api, TF_OK, "", {0}};
}

// Written once under the driver's LoadOnce; trivially destructible, so
// nothing runs at exit.
LoadResult g_result;

}  // namespace

const DriverApi *load_driver() {
    if (!load_once(Loaded::driver).run([] { g_result = open_driver_api(); })) {
        fail_lost_load("the CUDA driver");
        return nullptr;
    }
    const LoadResult &result = g_result;
    if (!result.api) {
        tf::fail(result.status, result.call, TF_CODE_NONE, 0, "%s", result.detail);
        return nullptr;
    }
    return result.api;
}

const char *driver_override_path() {
    // Written under the driver's LoadOnce, which every reader passed.
    return g_override[0] ? g_override : nullptr;
}

const DriverApi *init_driver() {
    const DriverApi *api = load_driver();
    if (!api || g_initialized.load(std::memory_order_acquire)) return api;
    if (!api->cuInit) {
        fail_missing("cuInit");
        return nullptr;
    }
    CUresult r = api->cuInit(0);
    if (r != CUDA_SUCCESS) {
        fail_cuda(*api, "cuInit", r);
        return nullptr;
    }
    g_initialized.store(true, std::memory_order_release);
    return api;
}

}  // namespace tf
