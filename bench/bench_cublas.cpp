// SPDX-License-Identifier: MIT OR Apache-2.0
// tf_cublas_enqueue against raw cuBLAS in the same process: SGEMM 64x64
// enqueue on a cached handle, a handle made per call, and 8 threads each on
// its own slot against 8 threads with their own raw handles.  The torch.mm
// peer comes from bench/torch_cublas.py; tools/gpu/bench_report.py joins it with
// this file's sgemm64_enqueue row through the COMPARE line printed here.
// Like for like: both sides run cuBLAS SGEMM 64 into an existing output on
// one stream, so the goal is parity (<= 1.0x torch.mm); the earlier goal of
// 0.65x compared against a torch.mm that also allocated its output and ran
// through Python each call.
//
// The raw side dlopens the same libcublas SONAME the library loads, so both
// sides call one cuBLAS instance, and gives its handles the same explicit
// workspace the library gives its own (the default 32 MiB): the workspace
// decides which GEMM kernel cuBLAS picks, so anything else compares kernels.
//
// Two regimes, both reported: a sustained stream of 2000 enqueues (the
// launch queue fills, so an enqueue returns at the pace the GPU drains it,
// as in the design's anchor of 11.6 us), and bursts of 200 drained between
// samples (the CPU cost of one enqueue, where a wrapper's overhead shows).
#include <cublas_api.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "raw_cublas.h"

namespace {

using bench::load_raw_cublas;
using bench::RawCublas;
using bench::Sgemm;

constexpr int kN = 64;

struct Gemm {
    Sgemm sgemm;
    CUdeviceptr a, b, c;
};

const float kOne = 1.0f, kZero = 0.0f;

int32_t enqueue_gemm(cublasHandle_t handle, const Gemm &g) {
    return g.sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, kN, kN, kN, &kOne,
                   reinterpret_cast<const float *>(g.a), kN, reinterpret_cast<const float *>(g.b),
                   kN, &kZero, reinterpret_cast<float *>(g.c), kN);
}

int32_t gemm_callback(void *handle, void *, void *user_data) {
    return enqueue_gemm(static_cast<cublasHandle_t>(handle), *static_cast<const Gemm *>(user_data));
}

// Median time per call of `iters` calls, `reps` samples of each side
// interleaved; each side's queue is drained between samples, outside the
// timing, so neither measures the other's backlog.
template <class A, class SyncA, class B, class SyncB>
void paired_with_drain(int iters, int reps, A &&a, SyncA &&sync_a, B &&b, SyncB &&sync_b,
                       double *ma, double *mb) {
    std::vector<double> va, vb;
    for (int r = 0; r < reps; ++r) {
        va.push_back(bench::median_ns_per(iters, 1, a));
        sync_a();
        vb.push_back(bench::median_ns_per(iters, 1, b));
        sync_b();
    }
    std::sort(va.begin(), va.end());
    std::sort(vb.begin(), vb.end());
    *ma = va[va.size() / 2];
    *mb = vb[vb.size() / 2];
}

// Enqueues per second of `threads` threads running `body(i)` (which enqueues
// 100 GEMMs and waits for them) for about 0.3 s after a common start.
template <class Setup, class Body>
double aggregate_rate(int threads, Setup &&setup, Body &&body) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::atomic<long> total{0};
    std::vector<std::thread> th;
    for (int i = 0; i < threads; ++i)
        th.emplace_back([&, i] {
            setup(i);
            ready.fetch_add(1);
            while (!go.load()) std::this_thread::yield();
            auto t0 = bench::clk::now();
            long k = 0;
            while (bench::ns_since(t0) < 3e8) {
                body(i);
                k += 100;
            }
            total.fetch_add(k);
        });
    while (ready.load() < threads) std::this_thread::yield();
    auto t0 = bench::clk::now();
    go.store(true);
    for (auto &t : th) t.join();
    return total.load() / (bench::ns_since(t0) / 1e9);
}

}  // namespace

int main() {
    bench::RawDriver d = bench::load_raw_driver();
    RawCublas cb = load_raw_cublas();
    tf_runtime *rt = nullptr;
    if (tf_runtime_new(0, &rt) != TF_OK) bench::die("tf_runtime_new");
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    bench::ok(tf_runtime_device_info(rt, &p), "tf_runtime_device_info");
    int driver = 0, version = 0;
    d.driver_version(&driver);
    if (tf_cublas_version(&version) != TF_OK) bench::die("tf_cublas_version");
    bench::info("device", p.name);
    bench::info("driver", std::to_string(driver));
    bench::info("cublas", std::to_string(version));
    void *primary_ptr = nullptr;
    bench::ok(tf_runtime_primary_context(rt, &primary_ptr), "tf_runtime_primary_context");
    CUcontext primary = static_cast<CUcontext>(primary_ptr);
    BENCH_CK(d.set_current(primary));

    const size_t bytes = sizeof(float) * kN * kN;
    Gemm g{cb.sgemm, 0, 0, 0};
    BENCH_CK(d.mem_alloc(&g.a, bytes));
    BENCH_CK(d.mem_alloc(&g.b, bytes));
    BENCH_CK(d.mem_alloc(&g.c, bytes));
    CUstream raw_stream = nullptr;
    BENCH_CK(d.stream_create(&raw_stream, CU_STREAM_NON_BLOCKING));
    BENCH_CK(d.memset_async(g.a, 0, bytes, raw_stream));
    BENCH_CK(d.memset_async(g.b, 0, bytes, raw_stream));
    BENCH_CK(d.stream_sync(raw_stream));
    // A raw handle configured as the library configures its own.
    const size_t workspace_bytes = TF_DEFAULT_CUBLAS_WORKSPACE_BYTES;
    auto raw_handle_on = [&](CUstream stream) {
        cublasHandle_t h = nullptr;
        CUdeviceptr ws = 0;
        BENCH_CK(d.mem_alloc(&ws, workspace_bytes));
        if (cb.create(&h) != 0 || cb.set_stream(h, reinterpret_cast<cudaStream_t>(stream)) != 0 ||
            cb.set_workspace(h, reinterpret_cast<void *>(ws), workspace_bytes) != 0)
            bench::die("raw cublasCreate");
        return h;
    };
    cublasHandle_t raw_handle = raw_handle_on(raw_stream);

    // First call of a slot: loads nothing new (cuBLAS is loaded), creates the
    // handle and its workspace.
    auto t0 = bench::clk::now();
    if (tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, gemm_callback, &g) != TF_OK)
        bench::die("tf_cublas_enqueue");
    bench::info("first_cublas_enqueue_us", std::to_string(bench::ns_since(t0) / 1e3));

    auto lib = [&] {
        bench::ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, gemm_callback, &g),
                  "tf_cublas_enqueue");
    };
    auto lib_sync = [&] { bench::ok(tf_runtime_sync(rt), "tf_runtime_sync"); };
    auto raw = [&] { enqueue_gemm(raw_handle, g); };
    auto raw_sync = [&] { d.stream_sync(raw_stream); };
    for (int i = 0; i < 300; ++i) lib(), raw();
    lib_sync(), raw_sync();

    double l = 0, r = 0;
    paired_with_drain(2000, 15, lib, lib_sync, raw, raw_sync, &l, &r);
    bench::report("sgemm64_enqueue", "tf_cublas_enqueue SGEMM 64, sustained (queue full)", l,
                  "raw cublasSgemm, cached handle", r, "ns", "<= 1.03x raw", l <= 1.03 * r);
    std::printf(
        "COMPARE|sgemm64_vs_torch|tf_cublas_enqueue SGEMM 64 vs torch.mm 64, sustained|"
        "sgemm64_enqueue|torch_mm64|1.0\n");
    paired_with_drain(200, 41, lib, lib_sync, raw, raw_sync, &l, &r);
    bench::report("sgemm64_enqueue_burst", "tf_cublas_enqueue SGEMM 64, bursts of 200 (CPU cost)",
                  l, "raw cublasSgemm, cached handle", r, "ns", "<= 1.03x raw", l <= 1.03 * r);
    std::printf(
        "COMPARE|sgemm64_burst_vs_torch|tf_cublas_enqueue SGEMM 64 vs torch.mm 64, bursts|"
        "sgemm64_enqueue_burst|torch_mm64_burst|1.0\n");

    BENCH_CK(d.set_current(nullptr));
    auto raw_current = [&] {  // the raw side needs a current context: keep it fair
        d.set_current(primary);
        enqueue_gemm(raw_handle, g);
        d.set_current(nullptr);
    };
    paired_with_drain(2000, 15, lib, lib_sync, raw_current, raw_sync, &l, &r);
    bench::report("sgemm64_enqueue_no_context",
                  "tf_cublas_enqueue SGEMM 64 from no current context", l,
                  "raw: set primary, cublasSgemm, unset", r, "ns", "<= 1.03x raw", l <= 1.03 * r);
    BENCH_CK(d.set_current(primary));

    auto per_call = [&] {
        cublasHandle_t h = nullptr;
        cb.create(&h);
        cb.set_stream(h, reinterpret_cast<cudaStream_t>(raw_stream));
        enqueue_gemm(h, g);
        cb.destroy(h);
    };
    paired_with_drain(20, 9, lib, lib_sync, per_call, raw_sync, &l, &r);
    bench::report("sgemm64_vs_handle_per_call", "tf_cublas_enqueue SGEMM 64 vs a handle per call",
                  l, "cublasCreate + SetStream + Sgemm + Destroy", r, "ns", "<= 0.10x",
                  l <= 0.10 * r);

    // 8 threads, each on its own slot / with its own raw handle and stream.
    const int T = 8;
    std::vector<tf_runtime *> bound(T, nullptr);
    std::vector<Gemm> own(T, g);
    std::vector<CUstream> streams(T, nullptr);
    std::vector<cublasHandle_t> handles(T, nullptr);
    for (int i = 0; i < T; ++i) {
        if (tf_runtime_bind_slot(rt, i, &bound[i]) != TF_OK) bench::die("tf_runtime_bind_slot");
        BENCH_CK(d.mem_alloc(&own[i].c, bytes));
        BENCH_CK(d.stream_create(&streams[i], CU_STREAM_NON_BLOCKING));
        handles[i] = raw_handle_on(streams[i]);
    }
    auto lib_setup = [&](int i) {
        d.set_current(primary);
        bench::ok(tf_cublas_enqueue(bound[i], TF_CUBLAS_POINTER_MODE_HOST, gemm_callback, &own[i]),
                  "tf_cublas_enqueue");
        bench::ok(tf_runtime_sync(bound[i]), "tf_runtime_sync");
    };
    auto lib_body = [&](int i) {
        for (int k = 0; k < 100; ++k)
            bench::ok(
                tf_cublas_enqueue(bound[i], TF_CUBLAS_POINTER_MODE_HOST, gemm_callback, &own[i]),
                "tf_cublas_enqueue");
        bench::ok(tf_runtime_sync(bound[i]), "tf_runtime_sync");
    };
    auto raw_setup = [&](int) { d.set_current(primary); };
    auto raw_body = [&](int i) {
        for (int k = 0; k < 100; ++k) enqueue_gemm(handles[i], own[i]);
        d.stream_sync(streams[i]);
    };
    std::vector<double> lr, rr;
    for (int rep = 0; rep < 5; ++rep) {
        lr.push_back(aggregate_rate(T, lib_setup, lib_body));
        rr.push_back(aggregate_rate(T, raw_setup, raw_body));
    }
    std::sort(lr.begin(), lr.end());
    std::sort(rr.begin(), rr.end());
    l = lr[lr.size() / 2] / 1e3, r = rr[rr.size() / 2] / 1e3;
    bench::report("mt8_sgemm64", "8 threads enqueueing SGEMM 64 (own slots), aggregate", l,
                  "8 threads, own raw handles and streams", r, "k/s", ">= 0.9x raw", l >= 0.9 * r);

    for (int i = 0; i < T; ++i) {
        cb.destroy(handles[i]);
        tf_runtime_release(bound[i]);
    }
    cb.destroy(raw_handle);
    BENCH_CK(d.set_current(nullptr));
    tf_runtime_release(rt);
    return 0;
}
