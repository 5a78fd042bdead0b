/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Shared by the benchmarks: the raw driver (loaded the way the library loads
// it, so both sides call the same libcuda), median timing, and result rows.
//
// Every row is measured next to its raw equivalent in the same process,
// interleaved, because absolute times drift between runs and machines.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tenferro_gpu.h"

namespace bench {

using clk = std::chrono::steady_clock;

inline double ns_since(clk::time_point t0) {
    return std::chrono::duration<double, std::nano>(clk::now() - t0).count();
}

// Median over `reps` samples of the mean time per call of `iters` calls.
template <class F>
double median_ns_per(int iters, int reps, F &&f) {
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
        auto t0 = clk::now();
        for (int i = 0; i < iters; ++i) f();
        v.push_back(ns_since(t0) / iters);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Two loops measured alternately, `reps` samples each; medians returned.
template <class A, class B>
void paired_median_ns(int iters, int reps, A &&a, B &&b, double *ma, double *mb) {
    std::vector<double> va, vb;
    for (int r = 0; r < reps; ++r) {
        va.push_back(median_ns_per(iters, 1, a));
        vb.push_back(median_ns_per(iters, 1, b));
    }
    std::sort(va.begin(), va.end());
    std::sort(vb.begin(), vb.end());
    *ma = va[va.size() / 2];
    *mb = vb[vb.size() / 2];
}

[[noreturn]] inline void die(const char *what) {
    std::fprintf(stderr, "bench: %s: %s\n", what, tf_last_error_message());
    std::exit(1);
}

// A library call that must succeed for the measurement to mean anything.
inline void ok(tf_status st, const char *what) {
    if (st != TF_OK) die(what);
}

#define BENCH_CK(x)                                                                   \
    do {                                                                              \
        CUresult r_ = (x);                                                            \
        if (r_ != CUDA_SUCCESS) {                                                     \
            std::fprintf(stderr, "bench: %s failed: %d\n", #x, static_cast<int>(r_)); \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

// The raw driver entry points the baselines use.
struct RawDriver {
    PFN_cuInit_v2000 init;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuDevicePrimaryCtxRetain_v7000 primary_retain;
    PFN_cuCtxGetCurrent_v4000 get_current;
    PFN_cuCtxSetCurrent_v4000 set_current;
    PFN_cuCtxCreate_v12050 ctx_create;  // NULL on a driver without it (the double)
    PFN_cuCtxDestroy_v4000 ctx_destroy;
    PFN_cuDriverGetVersion_v2020 driver_version;
    PFN_cuMemAlloc_v3020 mem_alloc;
    PFN_cuMemsetD8Async_v3020 memset_async;
    PFN_cuStreamCreate_v2000 stream_create;
    PFN_cuStreamSynchronize_v2000 stream_sync;
};

// Stores entry point `name` of CUDA ABI `version` of libcuda.so.1 (the
// driver the library loads too) into *slot, a function pointer; false (and
// *slot NULL) if the driver lacks it.
inline bool driver_entry_if_any(const char *name, int version, void *slot) {
    static PFN_cuGetProcAddress_v12000 gpa = [] {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            std::fprintf(stderr, "bench: no CUDA driver: %s\n", dlerror());
            std::exit(1);
        }
        return reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
    }();
    void **p = static_cast<void **>(slot);
    if (!gpa || gpa(name, p, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, nullptr) != CUDA_SUCCESS ||
        !*p) {
        *p = nullptr;
        return false;
    }
    return true;
}

// As driver_entry_if_any; exits if the driver lacks it.
inline void driver_entry(const char *name, int version, void *slot) {
    if (!driver_entry_if_any(name, version, slot)) {
        std::fprintf(stderr, "bench: driver lacks %s\n", name);
        std::exit(1);
    }
}

inline RawDriver load_raw_driver() {
    RawDriver d{};
    auto get = driver_entry;
    get("cuInit", 2000, &d.init);
    get("cuDeviceGet", 2000, &d.device_get);
    get("cuDevicePrimaryCtxRetain", 7000, &d.primary_retain);
    get("cuCtxGetCurrent", 4000, &d.get_current);
    get("cuCtxSetCurrent", 4000, &d.set_current);
    // The driver double has no user-made contexts: benchmarks that need one
    // skip those rows when these are NULL.
    driver_entry_if_any("cuCtxCreate", 12050, &d.ctx_create);
    driver_entry_if_any("cuCtxDestroy", 4000, &d.ctx_destroy);
    get("cuDriverGetVersion", 2020, &d.driver_version);
    get("cuMemAlloc", 3020, &d.mem_alloc);
    get("cuMemsetD8Async", 3020, &d.memset_async);
    get("cuStreamCreate", 2000, &d.stream_create);
    get("cuStreamSynchronize", 2000, &d.stream_sync);
    BENCH_CK(d.init(0));
    return d;
}

// One result row; tools/gpu/run-bench turns these lines into docs/benchmarks.md.
//   RESULT|id|what|library|baseline name|baseline|unit|ratio|goal|met
inline void report(const std::string &id, const std::string &what, double lib,
                   const std::string &baseline_name, double baseline, const char *unit,
                   const std::string &goal, bool met) {
    std::printf("RESULT|%s|%s|%.1f|%s|%.1f|%s|%.3f|%s|%s\n", id.c_str(), what.c_str(), lib,
                baseline_name.c_str(), baseline, unit, baseline > 0 ? lib / baseline : 0.0,
                goal.c_str(), met ? "yes" : "NO");
    std::fflush(stdout);
}

inline void info(const char *key, const std::string &value) {
    std::printf("INFO|%s|%s\n", key, value.c_str());
    std::fflush(stdout);
}

}  // namespace bench
