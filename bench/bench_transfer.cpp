// SPDX-License-Identifier: MIT OR Apache-2.0
// Transfers against the raw driver in the same process, interleaved:
//  - the 4-byte scalar download (the hot path) on an idle stream and behind
//    20 us of kernel work, and what its address checks cost;
//  - downloads of 1 MiB .. 1 GiB into page-locked memory, into touched
//    pageable memory and into fresh (never touched) pageable memory, each
//    against the driver's own copy into the same kind of memory;
//  - uploads of the same sizes from touched pageable memory against the
//    driver's copy from the same buffer and from page-locked memory.
// Bandwidth rows (dl_<kind>_<n>MiB) are what tools/tuning/plot_transfers.py draws.
//
//   bench_transfer                   the rows above
//   bench_transfer --max-mib N       only sizes up to N MiB
//   bench_transfer --sweep [MiB]     pageable downloads of MiB (default 256)
//                                    for a grid of download_threads x
//                                    download_chunk_bytes: SWEEP lines
#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "bench_util.h"

namespace {

// Only entry points the driver double has too, so the benchmark can be
// smoke-tested without a GPU.
struct Raw {
    PFN_cuInit_v2000 init;
    PFN_cuDriverGetVersion_v2020 driver_version;
    PFN_cuCtxGetCurrent_v4000 get_current;
    PFN_cuCtxSetCurrent_v4000 set_current;
    PFN_cuStreamCreate_v2000 stream_create;
    PFN_cuStreamSynchronize_v2000 stream_sync;
    PFN_cuMemcpyDtoHAsync_v3020 dtoh;
    PFN_cuMemHostAlloc_v2020 host_alloc;
    PFN_cuMemFreeHost_v2000 free_host;
    PFN_cuMemAlloc_v3020 mem_alloc;
    PFN_cuMemFree_v3020 mem_free;
    PFN_cuMemGetAddressRange_v3020 address_range;
    PFN_cuPointerGetAttribute_v4000 pointer_attribute;
    PFN_cuMemcpyHtoDAsync_v3020 htod;
    PFN_cuModuleLoadDataEx_v2010 module_load;
    PFN_cuModuleGetFunction_v2000 get_function;
    PFN_cuModuleUnload_v2000 module_unload;
    PFN_cuLaunchKernel_v4000 launch;
};

Raw load_raw() {
    Raw r{};
    bench::driver_entry("cuInit", 2000, &r.init);
    bench::driver_entry("cuDriverGetVersion", 2020, &r.driver_version);
    bench::driver_entry("cuCtxGetCurrent", 4000, &r.get_current);
    bench::driver_entry("cuCtxSetCurrent", 4000, &r.set_current);
    bench::driver_entry("cuStreamCreate", 2000, &r.stream_create);
    bench::driver_entry("cuStreamSynchronize", 2000, &r.stream_sync);
    bench::driver_entry("cuMemcpyDtoHAsync", 3020, &r.dtoh);
    bench::driver_entry("cuMemHostAlloc", 2020, &r.host_alloc);
    bench::driver_entry("cuMemFreeHost", 2000, &r.free_host);
    bench::driver_entry("cuMemAlloc", 3020, &r.mem_alloc);
    bench::driver_entry("cuMemFree", 3020, &r.mem_free);
    bench::driver_entry("cuMemGetAddressRange", 3020, &r.address_range);
    bench::driver_entry("cuPointerGetAttribute", 4000, &r.pointer_attribute);
    bench::driver_entry("cuMemcpyHtoDAsync", 3020, &r.htod);
    bench::driver_entry("cuModuleLoadDataEx", 2010, &r.module_load);
    bench::driver_entry("cuModuleGetFunction", 2000, &r.get_function);
    bench::driver_entry("cuModuleUnload", 2000, &r.module_unload);
    bench::driver_entry("cuLaunchKernel", 4000, &r.launch);
    BENCH_CK(r.init(0));
    return r;
}

constexpr size_t MiB = size_t(1) << 20;

struct Bench {
    Raw r;
    tf_runtime *rt = nullptr;
    CUcontext primary = nullptr;
    CUstream s = nullptr;  // the baselines' own stream in the primary context
};

// Never-touched anonymous memory: the first write faults every page in.
struct Fresh {
    explicit Fresh(size_t n) : bytes(n) {
        p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            std::perror("bench: mmap");
            std::exit(1);
        }
    }
    ~Fresh() { munmap(p, bytes); }
    void *p;
    size_t bytes;
};

template <class F>
double once_ns(F &&f) {
    auto t0 = bench::clk::now();
    f();
    return bench::ns_since(t0);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Download into fresh memory, library and driver alternately, each sample
// on a mapping of its own.
void fresh_medians(Bench &b, uint64_t dev, size_t n, int reps, tf_runtime *rt, double *lib,
                   double *raw) {
    std::vector<double> vl, vr;
    for (int i = 0; i < reps; ++i) {
        {
            Fresh f(n);
            vl.push_back(
                once_ns([&] { bench::ok(tf_download(rt, dev, f.p, n), "tf_download fresh"); }));
        }
        if (!raw) continue;
        Fresh g(n);
        vr.push_back(once_ns([&] {
            BENCH_CK(b.r.dtoh(g.p, dev, n, b.s));
            BENCH_CK(b.r.stream_sync(b.s));
        }));
    }
    *lib = median(vl);
    if (raw) *raw = median(vr);
}

std::string file_line(const char *path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line.empty() ? "unknown" : line;
}

void describe(Bench &b) {
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    bench::ok(tf_runtime_device_info(b.rt, &p), "tf_runtime_device_info");
    int driver = 0;
    b.r.driver_version(&driver);
    bench::info("device", p.name);
    bench::info("driver", std::to_string(driver));
    bench::info("host_cpus", std::to_string(std::thread::hardware_concurrency()));
    bench::info("transparent_hugepages", file_line("/sys/kernel/mm/transparent_hugepage/enabled"));
    // What the address check sees for pool and plain allocations: whether
    // the driver reports the allocation itself or a larger pool chunk.
    uint64_t pooled = 0;
    bench::ok(tf_alloc(b.rt, 1000, &pooled), "tf_alloc");
    bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
    CUdeviceptr plain = 0, base = 0;
    size_t size = 0;
    BENCH_CK(b.r.mem_alloc(&plain, 1000));
    for (uint64_t p2 : {pooled, static_cast<uint64_t>(plain)}) {
        CUresult rc = b.r.address_range(&base, &size, p2);
        char line[200];
        std::snprintf(line, sizeof line,
                      "1000 B at 0x%llx: cuMemGetAddressRange -> %d, base %+lld, size %zu",
                      static_cast<unsigned long long>(p2), static_cast<int>(rc),
                      static_cast<long long>(base) - static_cast<long long>(p2), size);
        bench::info(p2 == pooled ? "range_of_tf_alloc" : "range_of_cuMemAlloc", line);
    }
    BENCH_CK(b.r.mem_free(plain));
    bench::ok(tf_free(b.rt, pooled), "tf_free");
}

void scalar_rows(Bench &b) {
    uint64_t dev = 0;
    bench::ok(tf_alloc(b.rt, 64, &dev), "tf_alloc");
    bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
    void *pin = nullptr;
    BENCH_CK(b.r.host_alloc(&pin, 16, 0));
    uint32_t v = 0;
    auto lib = [&] { bench::ok(tf_download_scalar(b.rt, dev, &v, 4), "tf_download_scalar"); };
    auto raw = [&] {
        b.r.dtoh(pin, dev, 4, b.s);
        b.r.stream_sync(b.s);
    };
    bench::ok(tf_download_scalar(b.rt, dev, &v, 4), "tf_download_scalar");
    const int iters = 20000, reps = 9;
    double l = 0, r = 0;
    bench::paired_median_ns(iters, reps, lib, raw, &l, &r);
    bench::report("scalar_4B", "tf_download_scalar 4 B, idle stream, primary context current", l,
                  "cuMemcpyDtoHAsync to pinned + cuStreamSynchronize", r, "ns", "<= 1.0x raw",
                  l <= 1.0 * r);
    std::printf(
        "COMPARE|scalar_4B_vs_torch|tf_download_scalar 4 B vs torch x.item()|scalar_4B|"
        "torch_item_4B|0.7\n");
    const double raw_scalar = r;
    // A caller with no current context: the raw equivalent switches too.
    BENCH_CK(b.r.set_current(nullptr));
    auto raw_switching = [&] {
        CUcontext saved;
        b.r.get_current(&saved);
        b.r.set_current(b.primary);
        raw();
        b.r.set_current(saved);
    };
    bench::paired_median_ns(iters, reps, lib, raw_switching, &l, &r);
    bench::report("scalar_4B_no_context", "tf_download_scalar 4 B, no current context", l,
                  "context switch + copy + sync + switch back", r, "ns", "<= 1.05x raw",
                  l <= 1.05 * r);
    BENCH_CK(b.r.set_current(b.primary));
    // The checks every transfer makes, against the scalar download itself.
    CUdeviceptr base;
    size_t size;
    int ordinal;
    unsigned kind;
    uint32_t pageable_word = 0;
    double range =
        bench::median_ns_per(200000, reps, [&] { b.r.address_range(&base, &size, dev); });
    double device = bench::median_ns_per(200000, reps, [&] {
        b.r.pointer_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dev);
    });
    double host = bench::median_ns_per(200000, reps, [&] {
        b.r.pointer_attribute(&kind, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                              reinterpret_cast<CUdeviceptr>(&pageable_word));
    });
    // Memory from tf_alloc is checked without it (tune_scalar's CHECK own
    // line; dl_async_enqueue_4MiB shows the whole enqueue's cost).
    bench::report(
        "check_range",
        "cost of cuMemGetAddressRange (the address check of memory tf_alloc did not make)", range,
        "raw 4 B download", raw_scalar, "ns", "<= 0.025x a 4 B download",
        range <= 0.025 * raw_scalar);
    bench::report("check_device",
                  "cost of cuPointerGetAttribute(DEVICE_ORDINAL) (the check, several devices)",
                  device, "raw 4 B download", raw_scalar, "ns", "<= 0.025x a 4 B download",
                  device <= 0.025 * raw_scalar);
    // Only tf_download and tf_upload pay it (tf_download_scalar, the hot
    // path, does not): it decides between the direct and the staged path and
    // refuses device memory passed as host memory.
    bench::report("check_host_kind",
                  "cost of cuPointerGetAttribute(MEMORY_TYPE) on pageable memory (tf_download)",
                  host, "raw 4 B download", raw_scalar, "ns", "<= 0.2x a 4 B download",
                  host <= 0.2 * raw_scalar);
    BENCH_CK(b.r.free_host(pin));
    bench::ok(tf_free(b.rt, dev), "tf_free");
}

// 20 us of device work: a one-thread kernel that spins on the global timer
// (the driver double runs it as a no-op).
const char kSpinPtx[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n\n"
    ".visible .entry tf_bench_spin(\n\t.param .u64 tf_bench_spin_ns)\n{\n"
    "\t.reg .pred %p;\n\t.reg .u64 %ns, %t0, %t;\n"
    "\tld.param.u64 %ns, [tf_bench_spin_ns];\n"
    "\tmov.u64 %t0, %globaltimer;\n"
    "wait:\n\tmov.u64 %t, %globaltimer;\n\tsub.u64 %t, %t, %t0;\n"
    "\tsetp.lt.u64 %p, %t, %ns;\n\t@%p bra wait;\n\tret;\n}\n";

// tf_download_scalar queued behind 20 us of kernel work on the slot's
// stream: what the read adds to the work alone, against what a copy and a
// stream wait add.
void busy_scalar_rows(Bench &b) {
    void *stream = nullptr;
    bench::ok(tf_runtime_stream(b.rt, &stream), "tf_runtime_stream");
    CUstream slot = static_cast<CUstream>(stream);
    CUmodule module = nullptr;
    CUfunction spin = nullptr;
    BENCH_CK(b.r.module_load(&module, kSpinPtx, 0, nullptr, nullptr));
    BENCH_CK(b.r.get_function(&spin, module, "tf_bench_spin"));
    uint64_t dev = 0;
    bench::ok(tf_alloc(b.rt, 64, &dev), "tf_alloc");
    bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
    void *pin = nullptr;
    BENCH_CK(b.r.host_alloc(&pin, 16, 0));
    uint64_t ns = 20000;
    void *params[] = {&ns};
    uint32_t v = 0;
    auto work = [&] { BENCH_CK(b.r.launch(spin, 1, 1, 1, 1, 1, 1, 0, slot, params, nullptr)); };
    auto alone = [&] {
        work();
        BENCH_CK(b.r.stream_sync(slot));
    };
    auto lib = [&] {
        work();
        bench::ok(tf_download_scalar(b.rt, dev, &v, 4), "tf_download_scalar");
    };
    auto raw = [&] {
        work();
        BENCH_CK(b.r.dtoh(pin, dev, 4, slot));
        BENCH_CK(b.r.stream_sync(slot));
    };
    lib();  // loads the read kernel
    const int iters = 2000, reps = 9;
    std::vector<double> va, vl, vr;
    for (int i = 0; i < reps; ++i) {
        va.push_back(bench::median_ns_per(iters, 1, alone));
        vl.push_back(bench::median_ns_per(iters, 1, lib));
        vr.push_back(bench::median_ns_per(iters, 1, raw));
    }
    const double a = median(va), l = median(vl), r = median(vr);
    bench::info("scalar_after_20us_work_alone_ns", std::to_string(a));
    bench::report("scalar_4B_busy_added",
                  "tf_download_scalar 4 B after 20 us of kernel work: time added to the work",
                  l - a, "cuMemcpyDtoHAsync + cuStreamSynchronize, time added", r - a, "ns",
                  "<= 0.25x raw", l - a <= 0.25 * (r - a));
    bench::report("scalar_4B_after_20us", "20 us kernel + tf_download_scalar 4 B, total", l,
                  "20 us kernel + cuMemcpyDtoHAsync + cuStreamSynchronize", r, "ns", "<= 1.0x raw",
                  l <= r);
    std::printf(
        "COMPARE|scalar_4B_after_20us_vs_torch|20 us kernel + tf_download_scalar vs "
        "torch.cuda._sleep(20 us) + x.item()|scalar_4B_after_20us|"
        "torch_item_after_20us|0.85\n");
    BENCH_CK(b.r.free_host(pin));
    bench::ok(tf_free(b.rt, dev), "tf_free");
    BENCH_CK(b.r.module_unload(module));
}

void report_bandwidth(const char *kind, size_t n, double lib_ns, double raw_ns, const char *what,
                      const char *baseline, double goal) {
    char id[64], text[160], goal_text[64];
    const bool up = std::strncmp(kind, "ul_", 3) == 0;
    std::snprintf(id, sizeof id, "%s%s_%zuMiB", up ? "" : "dl_", kind, n / MiB);
    std::snprintf(text, sizeof text, "%s %zu MiB, %s", up ? "tf_upload" : "tf_download", n / MiB,
                  what);
    std::snprintf(goal_text, sizeof goal_text, ">= %.2gx %s", goal,
                  std::strstr(baseline, "page-locked") ? "page-locked" : "driver");
    const double lib = n / lib_ns, raw = n / raw_ns;  // bytes per ns = GB/s
    bench::report(id, text, lib, baseline, raw, "GB/s", goal_text, lib >= goal * raw);
}

// Uploads from the touched pageable buffer (and, for the baseline, from
// page-locked memory), each followed by a wait for the stream it used.
void upload_rows(Bench &b, uint64_t dev, const char *page, const void *pin, size_t n, int iters,
                 int reps) {
    auto lib = [&] {
        bench::ok(tf_upload(b.rt, page, dev, n), "tf_upload");
        bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
    };
    auto raw_from = [&](const void *src) {
        return [&b, src, dev, n] {
            BENCH_CK(b.r.htod(dev, src, n, b.s));
            BENCH_CK(b.r.stream_sync(b.s));
        };
    };
    lib();  // staging, threads
    double l = 0, r = 0;
    bench::paired_median_ns(iters, reps, lib, raw_from(page), &l, &r);
    report_bandwidth("ul_pageable", n, l, r, "touched pageable source, then sync",
                     "cuMemcpyHtoDAsync + sync (driver's pageable path)", 2);
    if (n < 64 * MiB) return;
    bench::paired_median_ns(iters, reps, lib, raw_from(pin), &l, &r);
    report_bandwidth("ul_pageable_vs_pinned", n, l, r, "touched pageable source, then sync",
                     "cuMemcpyHtoDAsync from page-locked memory + sync", 0.8);
}

void bulk_rows(Bench &b, size_t n) {
    const int iters = n <= MiB ? 50 : n <= 4 * MiB ? 20 : n <= 16 * MiB ? 8 : n <= 64 * MiB ? 3 : 1;
    const int reps = n >= 1024 * MiB ? 5 : 7;
    uint64_t dev = 0;
    bench::ok(tf_alloc(b.rt, n, &dev), "tf_alloc");
    bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
    void *pin = nullptr;
    BENCH_CK(b.r.host_alloc(&pin, n, 0));
    char *page = static_cast<char *>(std::malloc(n));
    std::memset(page, 1, n);
    bench::ok(tf_download(b.rt, dev, pin, n), "tf_download pinned");
    bench::ok(tf_download(b.rt, dev, page, n), "tf_download pageable");  // staging, threads
    double l = 0, r = 0;
    auto raw_into = [&](void *dst) {
        return [&b, dst, dev, n] {
            b.r.dtoh(dst, dev, n, b.s);
            b.r.stream_sync(b.s);
        };
    };
    bench::paired_median_ns(
        iters, reps, [&] { bench::ok(tf_download(b.rt, dev, pin, n), "tf_download"); },
        raw_into(pin), &l, &r);
    report_bandwidth("pinned", n, l, r, "page-locked destination", "cuMemcpyDtoHAsync + sync",
                     0.95);
    const double pinned_lib = l;
    bench::paired_median_ns(
        iters, reps, [&] { bench::ok(tf_download(b.rt, dev, page, n), "tf_download"); },
        raw_into(page), &l, &r);
    report_bandwidth("pageable", n, l, r, "touched pageable destination",
                     "cuMemcpyDtoHAsync + sync (driver's pageable path)", 2);
    if (n >= 64 * MiB)
        report_bandwidth("pageable_vs_pinned", n, l, pinned_lib,
                         "touched pageable destination against a page-locked one",
                         "tf_download into page-locked memory", 0.8);
    upload_rows(b, dev, page, pin, n, iters, reps);
    fresh_medians(b, dev, n, n >= 1024 * MiB ? 3 : 5, b.rt, &l, &r);
    report_bandwidth("fresh", n, l, r, "fresh pageable destination (first touch)",
                     "cuMemcpyDtoHAsync + sync (driver's pageable path)", 3);
    std::free(page);
    BENCH_CK(b.r.free_host(pin));
    bench::ok(tf_free(b.rt, dev), "tf_free");
}

// Pageable downloads of n bytes for a grid of options; the lead picks the
// defaults from these lines.
void sweep(Bench &b, size_t n) {
    uint64_t dev = 0;
    bench::ok(tf_alloc(b.rt, n, &dev), "tf_alloc");
    bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
    char *page = static_cast<char *>(std::malloc(n));
    std::memset(page, 1, n);
    std::vector<double> vt;
    for (int i = 0; i < 5; ++i)
        vt.push_back(once_ns([&] {
            BENCH_CK(b.r.dtoh(page, dev, n, b.s));
            BENCH_CK(b.r.stream_sync(b.s));
        }));
    double fl = 0, fr = 0;
    fresh_medians(b, dev, n, 3, b.rt, &fl, &fr);
    std::printf("SWEEP_DRIVER|%zu|%.2f|%.2f\n", n, n / median(vt), n / fr);
    std::printf("# SWEEP|threads|chunk_bytes|touched GB/s|fresh GB/s   (%zu MiB)\n", n / MiB);
    for (uint32_t threads : {1u, 2u, 4u, 6u, 8u, 12u, 16u}) {
        for (uint32_t chunk_mib : {1u, 2u, 4u, 8u, 16u, 32u}) {
            tf_runtime_options o;
            tf_runtime_options_init(&o, sizeof o);
            o.download_threads = threads;
            o.download_chunk_bytes = chunk_mib << 20;
            tf_runtime *rt = nullptr;
            bench::ok(tf_runtime_new_with_options(0, &o, &rt), "tf_runtime_new_with_options");
            bench::ok(tf_download(rt, dev, page, n), "tf_download");  // staging, threads
            std::vector<double> v;
            for (int i = 0; i < 5; ++i)
                v.push_back(
                    once_ns([&] { bench::ok(tf_download(rt, dev, page, n), "tf_download"); }));
            fresh_medians(b, dev, n, 3, rt, &fl, nullptr);
            std::printf("SWEEP|%u|%u|%.2f|%.2f\n", threads, chunk_mib << 20, n / median(v), n / fl);
            std::fflush(stdout);
            tf_runtime_release(rt);
        }
    }
    std::free(page);
    bench::ok(tf_free(b.rt, dev), "tf_free");
}

}  // namespace

int main(int argc, char **argv) {
    size_t max_mib = 1024, sweep_mib = 0;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--max-mib") && i + 1 < argc) {
            max_mib = std::strtoul(argv[++i], nullptr, 10);
        } else if (!std::strcmp(argv[i], "--sweep")) {
            sweep_mib =
                i + 1 < argc && argv[i + 1][0] != '-' ? std::strtoul(argv[++i], nullptr, 10) : 256;
        } else {
            std::fprintf(stderr, "usage: %s [--max-mib N] [--sweep [MiB]]\n", argv[0]);
            return 2;
        }
    }
    Bench b;
    b.r = load_raw();
    bench::ok(tf_runtime_new(0, &b.rt), "tf_runtime_new");
    void *primary = nullptr;
    bench::ok(tf_runtime_primary_context(b.rt, &primary), "tf_runtime_primary_context");
    b.primary = static_cast<CUcontext>(primary);
    BENCH_CK(b.r.set_current(b.primary));
    BENCH_CK(b.r.stream_create(&b.s, CU_STREAM_NON_BLOCKING));
    // The primary context stays current for the raw calls; the library then
    // takes its fast path (one cuCtxGetCurrent), as a caller inside
    // tf_with_context would.
    if (sweep_mib) {
        describe(b);
        sweep(b, sweep_mib * MiB);
    } else {
        describe(b);
        scalar_rows(b);
        busy_scalar_rows(b);
        for (size_t mib : {1, 4, 16, 64, 256, 1024})
            if (mib <= max_mib) bulk_rows(b, mib * MiB);
    }
    tf_runtime_release(b.rt);
    return 0;
}
