// SPDX-License-Identifier: MIT OR Apache-2.0
// Device memory against the raw driver, in the same process, interleaved
// (docs/memory.md):
//  - loop_<S>: tf_alloc S, one kernel touching it (cuMemsetD8Async of its
//    first 256 bytes), tf_free, tf_runtime_sync, for S = 1 MiB, 64 MiB,
//    1 GiB, against the same loop on a raw pool of release threshold
//    UINT64_MAX (goal <= 1.1x); loop_default_<S> puts the loop next to the
//    device's default pool (cuMemAllocAsync, threshold 0), which the
//    library used before 1.2; COMPARE rows against PyTorch's loop
//    (bench/torch_memory.py: torch.empty, an index fill, del,
//    torch.cuda.synchronize(); goal <= 0.6x);
//  - loop_scalar_<S>: the same loop ending in tf_download_scalar of 4 bytes
//    (then the free), against the raw pool + cuMemcpyDtoHAsync into
//    page-locked memory + cuStreamSynchronize (goal <= 1.1x);
//  - pair_<S>: tf_alloc + tf_free, no sync, 256 B .. 64 MiB, against
//    cuMemAllocFromPoolAsync + cuMemFreeAsync on a kept pool (goal <= 1.1x);
//  - random_8_slots: 10,000 allocations of random sizes (256 B .. 256 MiB,
//    log-uniform, at most 8 GiB live) across 8 threads, one slot each:
//    reserved memory (the pool's peak) <= 1.5x the peak in use, 0 errors.
// The loops run with the primary context current, as a driver-API caller
// has it; medians of 15 runs of 20 iterations (the pair: of 1000).
//
//   bench_memory            the rows above (GPU machine)
//   bench_memory --smoke    small sizes and counts against the driver double:
//                           every row runs and the bytes are checked
//   bench_memory --pairs N lib|raw
//                           N pairs of 4 KiB, untimed, for counting
//                           instructions (valgrind --tool=callgrind, against
//                           the double: docs/memory.md)
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "bench_util.h"

namespace {

constexpr size_t KiB = size_t(1) << 10, MiB = size_t(1) << 20, GiB = size_t(1) << 30;
constexpr size_t kTouch = 256;  // bytes the kernel writes

struct Raw {
    PFN_cuInit_v2000 init;
    PFN_cuCtxSetCurrent_v4000 set_current;
    PFN_cuStreamCreate_v2000 stream_create;
    PFN_cuStreamSynchronize_v2000 stream_sync;
    PFN_cuMemPoolCreate_v11020 pool_create;
    PFN_cuMemPoolSetAttribute_v11020 pool_set;
    PFN_cuMemPoolDestroy_v11020 pool_destroy;
    PFN_cuMemAllocFromPoolAsync_v11020 alloc_from_pool;
    PFN_cuMemAllocAsync_v11020 alloc_async;
    PFN_cuMemFreeAsync_v11020 free_async;
    PFN_cuMemsetD8Async_v3020 memset_async;
    PFN_cuMemcpyDtoHAsync_v3020 dtoh_async;
    PFN_cuMemHostAlloc_v2020 host_alloc;
    PFN_cuMemFreeHost_v2000 free_host;
};

Raw load_raw() {
    Raw r{};
    bench::driver_entry("cuInit", 2000, &r.init);
    bench::driver_entry("cuCtxSetCurrent", 4000, &r.set_current);
    bench::driver_entry("cuStreamCreate", 2000, &r.stream_create);
    bench::driver_entry("cuStreamSynchronize", 2000, &r.stream_sync);
    bench::driver_entry("cuMemPoolCreate", 11020, &r.pool_create);
    bench::driver_entry("cuMemPoolSetAttribute", 11020, &r.pool_set);
    bench::driver_entry("cuMemPoolDestroy", 11020, &r.pool_destroy);
    bench::driver_entry("cuMemAllocFromPoolAsync", 11020, &r.alloc_from_pool);
    bench::driver_entry("cuMemAllocAsync", 11020, &r.alloc_async);
    bench::driver_entry("cuMemFreeAsync", 11020, &r.free_async);
    bench::driver_entry("cuMemsetD8Async", 3020, &r.memset_async);
    bench::driver_entry("cuMemcpyDtoHAsync", 3020, &r.dtoh_async);
    bench::driver_entry("cuMemHostAlloc", 2020, &r.host_alloc);
    bench::driver_entry("cuMemFreeHost", 2000, &r.free_host);
    BENCH_CK(r.init(0));
    return r;
}

struct Bench {
    Raw r;
    tf_runtime *rt = nullptr;
    CUstream slot = nullptr;  // the library's stream of this thread's slot
    CUstream raw = nullptr;   // the raw loops' own non-blocking stream
    CUmemoryPool kept = nullptr;
    bool smoke = false;
    int iters = 20, reps = 15;
};

// The raw side's pool: what the library's pool is, made by hand.
CUmemoryPool kept_pool(const Raw &r) {
    CUmemPoolProps props;
    std::memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool = nullptr;
    BENCH_CK(r.pool_create(&pool, &props));
    cuuint64_t keep = UINT64_MAX;
    BENCH_CK(r.pool_set(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    return pool;
}

std::string size_name(size_t n) {
    char s[32];
    if (n >= GiB)
        std::snprintf(s, sizeof s, "%zuGiB", n / GiB);
    else if (n >= MiB)
        std::snprintf(s, sizeof s, "%zuMiB", n / MiB);
    else if (n >= KiB)
        std::snprintf(s, sizeof s, "%zuKiB", n / KiB);
    else
        std::snprintf(s, sizeof s, "%zuB", n);
    return s;
}

// The value a loop's kernel wrote must be there: what was timed did the work.
void check_touched(Bench &b, uint64_t p, unsigned char v) {
    unsigned char got[4] = {0};
    bench::ok(tf_download_scalar(b.rt, p, got, sizeof got), "tf_download_scalar");
    if (got[0] != v || got[3] != v) bench::die("the kernel's bytes are not in the allocation");
}

void loop_rows(Bench &b) {
    std::vector<size_t> sizes = {MiB, 64 * MiB, GiB};
    if (b.smoke) sizes = {MiB, 4 * MiB};
    for (size_t n : sizes) {
        auto lib = [&] {
            uint64_t p = 0;
            bench::ok(tf_alloc(b.rt, n, &p), "tf_alloc");
            BENCH_CK(b.r.memset_async(p, 1, kTouch, b.slot));
            bench::ok(tf_free(b.rt, p), "tf_free");
            bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
        };
        auto raw_loop = [&](bool kept) {
            CUdeviceptr p = 0;
            BENCH_CK(kept ? b.r.alloc_from_pool(&p, n, b.kept, b.raw)
                          : b.r.alloc_async(&p, n, b.raw));
            BENCH_CK(b.r.memset_async(p, 1, kTouch, b.raw));
            BENCH_CK(b.r.free_async(p, b.raw));
            BENCH_CK(b.r.stream_sync(b.raw));
        };
        lib();  // warm: the pools hold the size
        raw_loop(true);
        double l = 0, k = 0, d = 0, l2 = 0;
        bench::paired_median_ns(
            b.iters, b.reps, lib, [&] { raw_loop(true); }, &l, &k);
        bench::paired_median_ns(
            b.iters, b.reps, lib, [&] { raw_loop(false); }, &l2, &d);
        const std::string s = size_name(n);
        bench::report("loop_" + s, "tf_alloc " + s + ", kernel, tf_free, tf_runtime_sync", l / 1e3,
                      "raw pool, threshold UINT64_MAX", k / 1e3, "us", "<= 1.1x raw", l <= 1.1 * k);
        bench::report("loop_default_" + s, "the same loop", l2 / 1e3,
                      "the device's default pool (cuMemAllocAsync)", d / 1e3, "us",
                      "<= 1.0x default pool", l2 <= d);
        std::printf(
            "COMPARE|loop_vs_torch_%s|the loop %s vs PyTorch's (empty, index_fill_, del, "
            "synchronize)|loop_%s|torch_loop_%s|0.6\n",
            s.c_str(), s.c_str(), s.c_str(), s.c_str());
        uint64_t p = 0;
        bench::ok(tf_alloc(b.rt, n, &p), "tf_alloc");
        BENCH_CK(b.r.memset_async(p, 7, kTouch, b.slot));
        check_touched(b, p, 7);
        bench::ok(tf_free(b.rt, p), "tf_free");
    }
}

void scalar_rows(Bench &b) {
    std::vector<size_t> sizes = {MiB, 64 * MiB, GiB};
    if (b.smoke) sizes = {MiB};
    void *pinned = nullptr;
    BENCH_CK(b.r.host_alloc(&pinned, 64, 0));
    for (size_t n : sizes) {
        uint32_t seen = 0;
        auto lib = [&] {
            uint64_t p = 0;
            uint32_t v = 0;
            bench::ok(tf_alloc(b.rt, n, &p), "tf_alloc");
            BENCH_CK(b.r.memset_async(p, 2, kTouch, b.slot));
            bench::ok(tf_download_scalar(b.rt, p, &v, sizeof v), "tf_download_scalar");
            bench::ok(tf_free(b.rt, p), "tf_free");
            seen = v;
        };
        auto raw = [&] {
            CUdeviceptr p = 0;
            BENCH_CK(b.r.alloc_from_pool(&p, n, b.kept, b.raw));
            BENCH_CK(b.r.memset_async(p, 2, kTouch, b.raw));
            BENCH_CK(b.r.dtoh_async(pinned, p, 4, b.raw));
            BENCH_CK(b.r.stream_sync(b.raw));
            BENCH_CK(b.r.free_async(p, b.raw));
        };
        lib();
        raw();
        double l = 0, r = 0;
        bench::paired_median_ns(b.iters, b.reps, lib, raw, &l, &r);
        if (seen != 0x02020202u) bench::die("tf_download_scalar read the wrong value");
        const std::string s = size_name(n);
        bench::report("loop_scalar_" + s,
                      "tf_alloc " + s + ", kernel, tf_download_scalar (4 B), tf_free", l / 1e3,
                      "raw pool + cuMemcpyDtoHAsync + cuStreamSynchronize", r / 1e3, "us",
                      "<= 1.1x raw", l <= 1.1 * r);
    }
    bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
    BENCH_CK(b.r.stream_sync(b.raw));
    BENCH_CK(b.r.free_host(pinned));
}

// The CPU cost of the pair: nothing waits, the stream only records the
// allocations and frees; it is synchronized between samples, untimed.
void pair_rows(Bench &b) {
    std::vector<size_t> sizes = {256, 4 * KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB};
    if (b.smoke) sizes = {256, 64 * KiB};
    const int iters = b.smoke ? 20 : 1000;
    for (size_t n : sizes) {
        auto lib = [&] {
            uint64_t p = 0;
            bench::ok(tf_alloc(b.rt, n, &p), "tf_alloc");
            bench::ok(tf_free(b.rt, p), "tf_free");
        };
        auto raw = [&] {
            CUdeviceptr p = 0;
            BENCH_CK(b.r.alloc_from_pool(&p, n, b.kept, b.raw));
            BENCH_CK(b.r.free_async(p, b.raw));
        };
        std::vector<double> vl, vr;
        for (int rep = 0; rep < b.reps + 1; ++rep) {
            double l = bench::median_ns_per(iters, 1, lib);
            bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
            double r = bench::median_ns_per(iters, 1, raw);
            BENCH_CK(b.r.stream_sync(b.raw));
            if (rep == 0) continue;  // warm-up
            vl.push_back(l);
            vr.push_back(r);
        }
        std::sort(vl.begin(), vl.end());
        std::sort(vr.begin(), vr.end());
        const std::string s = size_name(n);
        const double l = vl[vl.size() / 2], r = vr[vr.size() / 2];
        bench::report("pair_" + s, "tf_alloc + tf_free " + s + ", no sync", l,
                      "cuMemAllocFromPoolAsync + cuMemFreeAsync, kept pool", r, "ns", "<= 1.1x raw",
                      l <= 1.1 * r);
    }
}

// ---- random sizes across 8 slots ----------------------------------------------------

struct Workload {
    tf_runtime *rt;
    const Raw *r;
    CUcontext ctx;    // made current on each thread, for its raw kernel
    int allocations;  // per thread
    size_t largest;
    size_t budget;  // live bytes per thread
    unsigned seed;
    int errors = 0;
};

void random_thread(Workload *w, int slot) {
    tf_runtime *h = nullptr;
    if (tf_runtime_bind_slot(w->rt, slot, &h) != TF_OK) {
        ++w->errors;
        return;
    }
    void *s = nullptr;
    if (tf_runtime_stream(h, &s) != TF_OK || w->r->set_current(w->ctx) != CUDA_SUCCESS) ++w->errors;
    CUstream stream = static_cast<CUstream>(s);
    std::mt19937_64 rng(w->seed + slot);
    std::uniform_real_distribution<double> log_size(std::log2(256.0),
                                                    std::log2(double(w->largest)));
    std::vector<std::pair<uint64_t, size_t>> live;
    size_t live_bytes = 0;
    for (int i = 0; i < w->allocations && stream; ++i) {
        const size_t n = size_t(std::exp2(log_size(rng)));
        while (!live.empty() && live_bytes + n > w->budget) {
            size_t k = rng() % live.size();
            if (tf_free(h, live[k].first) != TF_OK) ++w->errors;
            live_bytes -= live[k].second;
            live[k] = live.back();
            live.pop_back();
        }
        uint64_t p = 0;
        if (tf_alloc(h, n, &p) != TF_OK) {
            ++w->errors;
            continue;
        }
        if (w->r->memset_async(p, 1, n < kTouch ? n : kTouch, stream) != CUDA_SUCCESS) ++w->errors;
        live.emplace_back(p, n);
        live_bytes += n;
        if (i % 64 == 63 && tf_runtime_sync(h) != TF_OK) ++w->errors;
    }
    for (auto &a : live)
        if (tf_free(h, a.first) != TF_OK) ++w->errors;
    if (tf_runtime_sync(h) != TF_OK) ++w->errors;
    tf_runtime_release(h);
}

void random_rows(Bench &b) {
    constexpr int kThreads = 8;
    tf_runtime_options o;
    tf_runtime_options_init(&o, sizeof o);
    o.stream_slots = kThreads;
    tf_runtime *rt = nullptr;
    bench::ok(tf_runtime_new_with_options(0, &o, &rt), "tf_runtime_new_with_options");
    // The device's pool is shared with the rows above: start it empty.
    bench::ok(tf_memory_trim(rt, 0), "tf_memory_trim");
    bench::ok(tf_memory_reset_peak(rt), "tf_memory_reset_peak");
    tf_memory_pool_stats before;
    tf_memory_pool_stats_init(&before, sizeof before);
    bench::ok(tf_memory_stats(rt, &before), "tf_memory_stats");
    void *ctx = nullptr;
    bench::ok(tf_runtime_primary_context(rt, &ctx), "tf_runtime_primary_context");
    std::vector<Workload> work(kThreads);
    std::vector<std::thread> threads;
    auto t0 = bench::clk::now();
    for (int t = 0; t < kThreads; ++t) {
        work[t] = Workload{rt,
                           &b.r,
                           static_cast<CUcontext>(ctx),
                           b.smoke ? 50 : 10000 / kThreads,
                           b.smoke ? MiB : 256 * MiB,
                           b.smoke ? 8 * MiB : GiB,
                           20261215u};
        threads.emplace_back(random_thread, &work[t], t);
    }
    for (auto &t : threads) t.join();
    const double seconds = bench::ns_since(t0) / 1e9;
    int errors = 0;
    for (auto &w : work) errors += w.errors;
    tf_memory_pool_stats s;
    tf_memory_pool_stats_init(&s, sizeof s);
    bench::ok(tf_memory_stats(rt, &s), "tf_memory_stats");
    bench::info("random_allocations", std::to_string(s.allocations - before.allocations));
    bench::info("random_seconds", std::to_string(seconds));
    bench::info("random_errors", std::to_string(errors));
    bench::info("random_oom_retries", std::to_string(s.oom_retries - before.oom_retries));
    if (s.allocations != s.frees || s.in_use_bytes != 0) bench::die("the workload left memory");
    bench::report("random_8_slots",
                  "10,000 allocations 256 B .. 256 MiB, <= 8 GiB live, 8 slots: pool's peak "
                  "reserved (errors " +
                      std::to_string(errors) + ")",
                  s.reserved_peak / double(MiB), "peak in use", s.in_use_peak / double(MiB), "MiB",
                  "<= 1.5x peak in use, 0 errors",
                  errors == 0 && s.reserved_peak <= 1.5 * s.in_use_peak);
    bench::ok(tf_runtime_release(rt), "tf_runtime_release");
}

// N pairs through the library or the raw pool, nothing else, so a count of
// instructions (callgrind) for two N tells the cost per pair.
int count_pairs(Bench &b, int n, bool lib) {
    for (int i = 0; i < n; ++i) {
        if (lib) {
            uint64_t p = 0;
            bench::ok(tf_alloc(b.rt, 4 * KiB, &p), "tf_alloc");
            bench::ok(tf_free(b.rt, p), "tf_free");
        } else {
            CUdeviceptr p = 0;
            BENCH_CK(b.r.alloc_from_pool(&p, 4 * KiB, b.kept, b.slot));
            BENCH_CK(b.r.free_async(p, b.slot));
        }
        if (i % 500 == 499) BENCH_CK(b.r.stream_sync(b.slot));
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    Bench b;
    b.smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
    const bool pairs = argc > 3 && std::strcmp(argv[1], "--pairs") == 0;
    if (b.smoke) b.iters = 3, b.reps = 3;
    b.r = load_raw();
    bench::ok(tf_runtime_new(0, &b.rt), "tf_runtime_new");
    void *ctx = nullptr;
    bench::ok(tf_runtime_primary_context(b.rt, &ctx), "tf_runtime_primary_context");
    BENCH_CK(b.r.set_current(static_cast<CUcontext>(ctx)));  // as a driver-API caller has it
    void *slot = nullptr;
    bench::ok(tf_runtime_stream(b.rt, &slot), "tf_runtime_stream");
    b.slot = static_cast<CUstream>(slot);
    BENCH_CK(b.r.stream_create(&b.raw, CU_STREAM_NON_BLOCKING));
    b.kept = kept_pool(b.r);
    if (pairs) return count_pairs(b, std::atoi(argv[2]), std::strcmp(argv[3], "lib") == 0);
    tf_device_properties info;
    tf_device_properties_init(&info, sizeof info);
    bench::ok(tf_runtime_device_info(b.rt, &info), "tf_runtime_device_info");
    bench::info("device", info.name);
    loop_rows(b);
    scalar_rows(b);
    pair_rows(b);
    random_rows(b);
    tf_memory_pool_stats s;
    tf_memory_pool_stats_init(&s, sizeof s);
    bench::ok(tf_memory_stats(b.rt, &s), "tf_memory_stats");
    bench::info("pool_reserved_bytes", std::to_string(s.reserved_bytes));
    BENCH_CK(b.r.pool_destroy(b.kept));
    bench::ok(tf_runtime_release(b.rt), "tf_runtime_release");
    return 0;
}
