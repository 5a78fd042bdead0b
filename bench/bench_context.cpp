// SPDX-License-Identifier: MIT OR Apache-2.0
// tf_with_context with an empty callback against the raw driver calls it
// replaces, from three starting points: the primary context already current,
// another context current, and no context current.
//
// ctx_current's goal is a ratio to its floor measured in the same run: the
// two cuCtxGetCurrent that an exact restore needs (one before the callback,
// one after it, since the callback may move the thread) and the callback
// itself, called through a pointer the compiler cannot see through, as the
// library must call it.
#include <cstdio>

#include "bench_util.h"

namespace {

int32_t empty_callback(void *) { return 0; }

// The callback as the raw side calls it: through a pointer, not inlined.
int32_t call_opaque(int32_t (*fn)(void *), void *user_data) {
    asm volatile("" : "+r"(fn));
    return fn(user_data);
}

}  // namespace

int main() {
    bench::RawDriver d = bench::load_raw_driver();
    tf_runtime *rt = nullptr;
    if (tf_runtime_new(0, &rt) != TF_OK) bench::die("tf_runtime_new");
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    bench::ok(tf_runtime_device_info(rt, &p), "tf_runtime_device_info");
    int driver = 0;
    d.driver_version(&driver);
    bench::info("device", p.name);
    bench::info("driver", std::to_string(driver));
    void *primary_ptr = nullptr;
    bench::ok(tf_runtime_primary_context(rt, &primary_ptr), "tf_runtime_primary_context");
    CUcontext primary = static_cast<CUcontext>(primary_ptr);

    CUdevice dev;
    BENCH_CK(d.device_get(&dev, 0));
    // A second context for row (b); the driver double has none to make, so
    // there only rows (a) and (c) run (make bench-context-smoke).
    CUcontext other = nullptr;
    if (d.ctx_create) BENCH_CK(d.ctx_create(&other, nullptr, 0, dev));
    BENCH_CK(d.set_current(nullptr));

    const int iters = 200000, reps = 15;
    double lib = 0, raw = 0;

    // (a) primary already current: the library checks with one cuCtxGetCurrent
    // before the callback and one after it (the callback may move the
    // thread); the raw baseline gives the same guarantee.
    BENCH_CK(d.set_current(primary));
    bench::paired_median_ns(
        iters, reps,
        [&] { bench::ok(tf_with_context(rt, empty_callback, nullptr), "tf_with_context"); },
        [&] {
            CUcontext c;
            d.get_current(&c);
            if (c != primary) d.set_current(primary);
            if (call_opaque(empty_callback, nullptr) != 0) bench::die("callback");
            CUcontext after;
            d.get_current(&after);
            if (after != c) d.set_current(c);
        },
        &lib, &raw);
    bench::report("ctx_current", "tf_with_context, primary context already current", lib,
                  "2 x cuCtxGetCurrent + compare, callback between", raw, "ns", "<= 1.3x floor",
                  lib <= 1.3 * raw);
    // The library's own cost: its handle, usable and name checks, frame and
    // callback guard (on the driver double the driver calls are slower, but
    // the difference is still the library's).
    bench::info("ctx_current_library_ns", std::to_string(lib - raw));

    auto raw_cycle = [&] {
        CUcontext saved;
        d.get_current(&saved);
        d.set_current(primary);
        d.set_current(saved);
    };
    // (b) another context current: save, activate, restore.
    if (other) {
        BENCH_CK(d.set_current(other));
        bench::paired_median_ns(
            iters, reps,
            [&] { bench::ok(tf_with_context(rt, empty_callback, nullptr), "tf_with_context"); },
            raw_cycle, &lib, &raw);
        bench::report("ctx_from_other", "tf_with_context from another context", lib,
                      "get + set + set (3 driver calls)", raw, "ns", "<= 100 ns", lib <= 100);
    }

    // (c) no context current.
    BENCH_CK(d.set_current(nullptr));
    bench::paired_median_ns(
        iters, reps,
        [&] { bench::ok(tf_with_context(rt, empty_callback, nullptr), "tf_with_context"); },
        raw_cycle, &lib, &raw);
    bench::report("ctx_from_none", "tf_with_context from no current context", lib,
                  "get + set + set (3 driver calls)", raw, "ns", "<= 100 ns", lib <= 100);

    CUcontext after = nullptr;
    d.get_current(&after);
    if (after != nullptr) {
        std::fprintf(stderr, "bench: the caller's (empty) context was not restored\n");
        return 1;
    }
    if (other) BENCH_CK(d.ctx_destroy(other));
    tf_runtime_release(rt);
    return 0;
}
