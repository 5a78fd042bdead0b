// SPDX-License-Identifier: MIT OR Apache-2.0
// Page-locked host memory and asynchronous copies against the raw driver, in
// the same process, interleaved:
//  - host_alloc_1MiB: tf_host_alloc + tf_host_free of a cached 1 MiB block
//    against cuMemHostAlloc + cuMemFreeHost (goal <= 0.1x, and <= 500 ns);
//  - dl_async_enqueue_4MiB: what tf_download_async costs the caller to queue
//    4 MiB into page-locked memory, against cuMemcpyDtoHAsync on the same
//    stream (goal <= 1.05x);
//  - ul_pinned_<n>MiB: tf_upload from a tf_host_alloc block against
//    cuMemcpyHtoD from a cuMemHostAlloc block, 1 MiB .. 1 GiB (>= 0.95x);
//  - overlap_8x64MiB: 8 x (upload 64 MiB, SGEMM 4096^2 through
//    tf_cublas_enqueue, download 64 MiB) on two slots with the asynchronous
//    copies, against the same work on one slot (goal <= 0.75x).
// bench/torch_host.py measures the PyTorch peers (COMPARE lines below).
//
//   bench_host            the rows above (GPU machine)
//   bench_host --smoke    tiny sizes and counts: checks the program runs and
//                         its copies are right, e.g. against the driver double
#include <cublas_v2.h>

#include <cstring>
#include <thread>

#include "bench_util.h"

namespace {

constexpr size_t MiB = size_t(1) << 20;

struct Raw {
    PFN_cuInit_v2000 init;
    PFN_cuCtxSetCurrent_v4000 set_current;
    PFN_cuMemHostAlloc_v2020 host_alloc;
    PFN_cuMemFreeHost_v2000 free_host;
    PFN_cuMemcpyDtoHAsync_v3020 dtoh_async;
    PFN_cuMemcpyHtoD_v3020 htod;
    PFN_cuStreamSynchronize_v2000 stream_sync;
};

Raw load_raw() {
    Raw r{};
    bench::driver_entry("cuInit", 2000, &r.init);
    bench::driver_entry("cuCtxSetCurrent", 4000, &r.set_current);
    bench::driver_entry("cuMemHostAlloc", 2020, &r.host_alloc);
    bench::driver_entry("cuMemFreeHost", 2000, &r.free_host);
    bench::driver_entry("cuMemcpyDtoHAsync", 3020, &r.dtoh_async);
    bench::driver_entry("cuMemcpyHtoD", 3020, &r.htod);
    bench::driver_entry("cuStreamSynchronize", 2000, &r.stream_sync);
    BENCH_CK(r.init(0));
    return r;
}

struct Bench {
    Raw r;
    tf_runtime *rt = nullptr;
    CUstream slot = nullptr;  // the calling thread's slot stream
    bool smoke = false;
};

void *host_block(tf_runtime *rt, size_t n) {
    void *p = nullptr;
    bench::ok(tf_host_alloc(rt, n, &p), "tf_host_alloc");
    return p;
}

uint64_t device_buffer(tf_runtime *rt, size_t n) {
    uint64_t d = 0;
    bench::ok(tf_alloc(rt, n, &d), "tf_alloc");
    bench::ok(tf_runtime_sync(rt), "tf_runtime_sync");
    return d;
}

void alloc_rows(Bench &b) {
    const size_t n = MiB;
    void *warm = host_block(b.rt, n);
    bench::ok(tf_host_free(b.rt, warm), "tf_host_free");  // the block is cached now
    auto lib = [&] {
        void *p = nullptr;
        bench::ok(tf_host_alloc(b.rt, n, &p), "tf_host_alloc");
        bench::ok(tf_host_free(b.rt, p), "tf_host_free");
    };
    auto raw = [&] {
        void *p = nullptr;
        BENCH_CK(b.r.host_alloc(&p, n, 0));
        BENCH_CK(b.r.free_host(p));
    };
    double l = 0, r = 0;
    const int lib_iters = b.smoke ? 100 : 20000, raw_iters = b.smoke ? 5 : 50;
    std::vector<double> vl, vr;
    for (int rep = 0; rep < (b.smoke ? 3 : 9); ++rep) {
        vl.push_back(bench::median_ns_per(lib_iters, 1, lib));
        vr.push_back(bench::median_ns_per(raw_iters, 1, raw));
    }
    std::sort(vl.begin(), vl.end());
    std::sort(vr.begin(), vr.end());
    l = vl[vl.size() / 2];
    r = vr[vr.size() / 2];
    tf_host_pool_stats s;
    tf_host_pool_stats_init(&s, sizeof s);
    bench::ok(tf_host_stats(b.rt, &s), "tf_host_stats");
    bench::info("host_pool_driver_allocations", std::to_string(s.driver_allocations));
    bench::report("host_alloc_1MiB", "tf_host_alloc + tf_host_free, cached 1 MiB block", l,
                  "cuMemHostAlloc + cuMemFreeHost 1 MiB", r, "ns", "<= 0.1x raw and <= 500 ns",
                  l <= 0.1 * r && l <= 500);
    std::printf(
        "COMPARE|host_alloc_vs_torch|tf_host_alloc + free 1 MiB vs torch pinned empty + "
        "del|host_alloc_1MiB|torch_pin_alloc_1MiB|1.0\n");
}

// Queueing cost only: a batch of copies is timed, then waited for untimed.
void enqueue_rows(Bench &b) {
    const size_t n = b.smoke ? 64 << 10 : 4 * MiB;
    const int batch = b.smoke ? 4 : 32, reps = b.smoke ? 3 : 31;
    uint64_t dev = device_buffer(b.rt, n);
    void *lib_dst = host_block(b.rt, n);
    void *raw_dst = nullptr;
    BENCH_CK(b.r.host_alloc(&raw_dst, n, CU_MEMHOSTALLOC_PORTABLE));
    std::vector<double> vl, vr;
    for (int rep = 0; rep < reps + 1; ++rep) {
        auto t0 = bench::clk::now();
        for (int i = 0; i < batch; ++i)
            bench::ok(tf_download_async(b.rt, dev, lib_dst, n), "tf_download_async");
        double l = bench::ns_since(t0) / batch;
        bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
        t0 = bench::clk::now();
        for (int i = 0; i < batch; ++i) BENCH_CK(b.r.dtoh_async(raw_dst, dev, n, b.slot));
        double r = bench::ns_since(t0) / batch;
        BENCH_CK(b.r.stream_sync(b.slot));
        if (rep == 0) continue;  // warm-up
        vl.push_back(l);
        vr.push_back(r);
    }
    std::sort(vl.begin(), vl.end());
    std::sort(vr.begin(), vr.end());
    const double l = vl[vl.size() / 2], r = vr[vr.size() / 2];
    bench::report("dl_async_enqueue_4MiB",
                  "tf_download_async 4 MiB into a tf_host_alloc block, enqueue cost", l,
                  "cuMemcpyDtoHAsync on the same stream", r, "ns", "<= 1.05x raw", l <= 1.05 * r);
    // What the library adds per call (its cuCtxGetCurrent, checks and lookups).
    bench::info("dl_async_library_ns", std::to_string(l - r));
    std::printf(
        "COMPARE|dl_async_vs_torch|tf_download_async 4 MiB vs torch copy_(non_blocking) "
        "enqueue|dl_async_enqueue_4MiB|torch_copy_async_4MiB|1.0\n");
    // What was measured copies the right bytes.
    std::vector<unsigned char> want(n, 0x5c);
    bench::ok(tf_upload(b.rt, want.data(), dev, n), "tf_upload");
    bench::ok(tf_download_async(b.rt, dev, lib_dst, n), "tf_download_async");
    bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
    if (std::memcmp(lib_dst, want.data(), n) != 0) bench::die("downloaded bytes differ");
    BENCH_CK(b.r.free_host(raw_dst));
    bench::ok(tf_host_free(b.rt, lib_dst), "tf_host_free");
    bench::ok(tf_free(b.rt, dev), "tf_free");
}

void upload_rows(Bench &b) {
    std::vector<size_t> sizes = {1, 4, 16, 64, 256, 1024};
    if (b.smoke) sizes = {1};
    for (size_t mib : sizes) {
        const size_t n = mib * MiB;
        const int iters = b.smoke ? 2 : n <= 4 * MiB ? 20 : n <= 64 * MiB ? 4 : 1;
        const int reps = b.smoke ? 3 : n >= 1024 * MiB ? 5 : 7;
        uint64_t dev = device_buffer(b.rt, n);
        void *lib_src = host_block(b.rt, n);
        void *raw_src = nullptr;
        BENCH_CK(b.r.host_alloc(&raw_src, n, CU_MEMHOSTALLOC_PORTABLE));
        std::memset(lib_src, 3, n);
        std::memset(raw_src, 3, n);
        double l = 0, r = 0;
        bench::paired_median_ns(
            iters, reps, [&] { bench::ok(tf_upload(b.rt, lib_src, dev, n), "tf_upload"); },
            [&] { BENCH_CK(b.r.htod(dev, raw_src, n)); }, &l, &r);
        char id[64], what[128];
        std::snprintf(id, sizeof id, "ul_pinned_%zuMiB", mib);
        std::snprintf(what, sizeof what, "tf_upload %zu MiB from a tf_host_alloc block", mib);
        bench::report(id, what, n / l, "cuMemcpyHtoD from cuMemHostAlloc memory", n / r, "GB/s",
                      ">= 0.95x driver", n / l >= 0.95 * (n / r));
        BENCH_CK(b.r.free_host(raw_src));
        bench::ok(tf_host_free(b.rt, lib_src), "tf_host_free");
        bench::ok(tf_host_trim(b.rt), "tf_host_trim");  // keep the host's pinned memory low
        bench::ok(tf_free(b.rt, dev), "tf_free");
    }
}

// ---- overlap --------------------------------------------------------------------------

using Sgemm = decltype(&cublasSgemm_v2);

struct Job {
    Sgemm sgemm;
    int n;
    uint64_t a, b, c;
};

int32_t sgemm_callback(void *handle, void *, void *user) {
    const Job &j = *static_cast<const Job *>(user);
    const float one = 1.0f, zero = 0.0f;
    return j.sgemm(static_cast<cublasHandle_t>(handle), CUBLAS_OP_N, CUBLAS_OP_N, j.n, j.n, j.n,
                   &one, reinterpret_cast<const float *>(j.a), j.n,
                   reinterpret_cast<const float *>(j.b), j.n, &zero, reinterpret_cast<float *>(j.c),
                   j.n);
}

// One slot's share: `count` rounds of upload, SGEMM, download, each on its
// own buffers, queued without waiting; then the slot is synchronized.
void rounds_on(tf_runtime *h, Sgemm sgemm, int n, int count, const std::vector<void *> &in,
               const std::vector<void *> &out, const std::vector<uint64_t> &a,
               const std::vector<uint64_t> &c, uint64_t bmat, int first) {
    const size_t bytes = size_t(n) * n * sizeof(float);
    std::vector<Job> jobs(count);
    for (int k = 0; k < count; ++k) {
        const int i = first + k;
        jobs[k] = Job{sgemm, n, a[i], bmat, c[i]};
        bench::ok(tf_upload_async(h, in[i], a[i], bytes), "tf_upload_async");
        bench::ok(tf_cublas_enqueue(h, TF_CUBLAS_POINTER_MODE_HOST, sgemm_callback, &jobs[k]),
                  "tf_cublas_enqueue");
        bench::ok(tf_download_async(h, c[i], out[i], bytes), "tf_download_async");
    }
    bench::ok(tf_runtime_sync(h), "tf_runtime_sync");
}

void overlap_rows(Bench &b) {
    const int n = b.smoke ? 64 : 4096, rounds = 8;
    const size_t bytes = size_t(n) * n * sizeof(float);
    void *fn = nullptr;
    bench::ok(tf_cublas_symbol("cublasSgemm_v2", &fn), "tf_cublas_symbol");
    Sgemm sgemm = reinterpret_cast<Sgemm>(fn);
    tf_runtime_options o;
    tf_runtime_options_init(&o, sizeof o);
    o.stream_slots = 2;
    tf_runtime *rt = nullptr;
    bench::ok(tf_runtime_new_with_options(0, &o, &rt), "tf_runtime_new_with_options");
    tf_runtime *slot[2] = {nullptr, nullptr};
    for (int s = 0; s < 2; ++s) bench::ok(tf_runtime_bind_slot(rt, s, &slot[s]), "bind_slot");
    std::vector<void *> in(rounds), out(rounds);
    std::vector<uint64_t> a(rounds), c(rounds);
    for (int i = 0; i < rounds; ++i) {
        in[i] = host_block(rt, bytes);
        out[i] = host_block(rt, bytes);
        float *f = static_cast<float *>(in[i]);
        for (size_t k = 0; k < size_t(n) * n; ++k) f[k] = float((k + i) % 7);
        a[i] = device_buffer(rt, bytes);
        c[i] = device_buffer(rt, bytes);
    }
    uint64_t bmat = device_buffer(rt, bytes);
    {
        // B = identity, so each result is its input: the smoke run checks it.
        std::vector<float> id(size_t(n) * n, 0.0f);
        for (int k = 0; k < n; ++k) id[size_t(k) * n + k] = 1.0f;
        bench::ok(tf_upload(rt, id.data(), bmat, bytes), "tf_upload");
    }
    auto serial = [&] { rounds_on(slot[0], sgemm, n, rounds, in, out, a, c, bmat, 0); };
    auto overlapped = [&] {
        std::thread other(
            [&] { rounds_on(slot[1], sgemm, n, rounds / 2, in, out, a, c, bmat, rounds / 2); });
        rounds_on(slot[0], sgemm, n, rounds / 2, in, out, a, c, bmat, 0);
        other.join();
    };
    serial();  // warm: cuBLAS handles, workspaces
    overlapped();
    double l = 0, r = 0;
    bench::paired_median_ns(1, b.smoke ? 1 : 5, overlapped, serial, &l, &r);
    bench::report("overlap_8x64MiB",
                  "8 x (upload 64 MiB, SGEMM 4096, download 64 MiB) on 2 slots, async copies",
                  l / 1e6, "the same on one slot", r / 1e6, "ms", "<= 0.75x one slot",
                  l <= 0.75 * r);
    for (int i = 0; i < rounds; ++i)
        if (std::memcmp(in[i], out[i], bytes) != 0) bench::die("overlap: a result differs");
    for (int i = 0; i < rounds; ++i) {
        bench::ok(tf_host_free(rt, in[i]), "tf_host_free");
        bench::ok(tf_host_free(rt, out[i]), "tf_host_free");
        bench::ok(tf_free(rt, a[i]), "tf_free");
        bench::ok(tf_free(rt, c[i]), "tf_free");
    }
    bench::ok(tf_free(rt, bmat), "tf_free");
    for (tf_runtime *h : slot) tf_runtime_release(h);
    tf_runtime_release(rt);
}

}  // namespace

int main(int argc, char **argv) {
    Bench b;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--smoke")) {
            b.smoke = true;
        } else {
            std::fprintf(stderr, "usage: %s [--smoke]\n", argv[0]);
            return 2;
        }
    }
    b.r = load_raw();
    bench::ok(tf_runtime_new(0, &b.rt), "tf_runtime_new");
    void *primary = nullptr, *stream = nullptr;
    bench::ok(tf_runtime_primary_context(b.rt, &primary), "tf_runtime_primary_context");
    BENCH_CK(b.r.set_current(static_cast<CUcontext>(primary)));
    bench::ok(tf_runtime_stream(b.rt, &stream), "tf_runtime_stream");
    b.slot = static_cast<CUstream>(stream);
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    bench::ok(tf_runtime_device_info(b.rt, &p), "tf_runtime_device_info");
    bench::info("device", p.name);
    alloc_rows(b);
    enqueue_rows(b);
    upload_rows(b);
    overlap_rows(b);
    tf_runtime_release(b.rt);
    return 0;
}
