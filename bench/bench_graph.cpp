// SPDX-License-Identifier: MIT OR Apache-2.0
// Graph capture (tf_graph_*) against the raw driver in the same process,
// interleaved, and PyTorch's torch.cuda.graph (bench/torch_cg.py, joined by
// the COMPARE lines printed here):
//  - a conjugate-gradient iteration at n = 512 and 8192: a GEMV (cuBLAS
//    SGEMM with one column), a dot that gives alpha, a fused update of x and
//    r, a dot that gives beta, a fused update of p (kernels: the PTX below),
//    and a scalar read of r.r to test convergence.  Four ways: the library
//    without a graph (tf_cublas_enqueue, tf_kernel_launch,
//    tf_download_scalar), the library with the body as a graph
//    (tf_graph_launch + tf_download_scalar), the raw driver the same way
//    (a cached cuBLAS handle configured like the library's, cuLaunchKernel,
//    cuMemcpyDtoHAsync into page-locked memory + cuStreamSynchronize) and
//    the raw driver with its own graph (cuStreamBeginCapture on its stream,
//    cuGraphLaunch, the same copy and wait).  Every way computes the same
//    floats: the run checks they agree bit for bit;
//  - the launch of a 10-kernel graph (bursts, drained between samples)
//    against raw cuGraphLaunch of the same graph;
//  - ending a capture of 10 kernels whose pointers changed into an existing
//    graph (tf_graph_capture_update, in place) against ending it into a new
//    instantiation (cuStreamEndCapture, cuGraphInstantiateWithFlags, and
//    the old executable and the captured graph destroyed);
//  - what a capture begun by hand costs to detect: cuStreamIsCapturing
//    (INFO lines).
//
//   bench_graph           the rows above (a GPU)
//   bench_graph --smoke   one tiny sample of everything, against the driver
//                         double (make bench-graph-smoke): it runs, and every
//                         way's floats agree
#include <cublas_api.h>

#include <cstring>
#include <vector>

#include "bench_util.h"
#include "raw_cublas.h"

namespace {

// The CG kernels; checked with ptxas for sm_90.  The driver double knows
// the names and runs them on host memory.
//   tf_bench_cg_dot(x, y, rr, out, n, mode): one block of 256 threads,
//     s = x . y; mode 0: *out = *rr / s; mode 1: *out = s / *rr, *rr = s
//   tf_bench_cg_xr(x, r, p, ap, alpha, n): x += *alpha p; r -= *alpha ap
//   tf_bench_cg_p(p, r, beta, n): p = r + *beta p
const char kCgPtx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".shared .align 4 .f32 tf_bench_cg_part[256];\n"
    ".visible .entry tf_bench_cg_dot(.param .u64 dot_x, .param .u64 dot_y, .param .u64 dot_rr,\n"
    "    .param .u64 dot_out, .param .u32 dot_n, .param .u32 dot_mode)\n{\n"
    "\t.reg .pred %p<4>;\n\t.reg .b32 %r<12>;\n\t.reg .f32 %f<8>;\n\t.reg .b64 %rd<10>;\n"
    "\tld.param.u64 %rd1, [dot_x];\n\tld.param.u64 %rd2, [dot_y];\n"
    "\tld.param.u64 %rd3, [dot_rr];\n\tld.param.u64 %rd4, [dot_out];\n"
    "\tld.param.u32 %r9, [dot_n];\n\tld.param.u32 %r10, [dot_mode];\n"
    "\tcvta.to.global.u64 %rd1, %rd1;\n\tcvta.to.global.u64 %rd2, %rd2;\n"
    "\tcvta.to.global.u64 %rd3, %rd3;\n\tcvta.to.global.u64 %rd4, %rd4;\n"
    "\tmov.u32 %r1, %tid.x;\n\tmov.f32 %f1, 0f00000000;\n\tmov.u32 %r2, %r1;\n"
    "DOT_SUM:\n\tsetp.ge.u32 %p1, %r2, %r9;\n\t@%p1 bra DOT_SUMMED;\n"
    "\tmul.wide.u32 %rd5, %r2, 4;\n\tadd.s64 %rd6, %rd1, %rd5;\n\tld.global.f32 %f2, [%rd6];\n"
    "\tadd.s64 %rd7, %rd2, %rd5;\n\tld.global.f32 %f3, [%rd7];\n"
    "\tfma.rn.f32 %f1, %f2, %f3, %f1;\n\tadd.u32 %r2, %r2, 256;\n\tbra DOT_SUM;\n"
    "DOT_SUMMED:\n\tmov.u32 %r3, tf_bench_cg_part;\n\tshl.b32 %r4, %r1, 2;\n"
    "\tadd.u32 %r5, %r3, %r4;\n\tst.shared.f32 [%r5], %f1;\n\tbar.sync 0;\n\tmov.u32 %r6, 128;\n"
    "DOT_REDUCE:\n\tsetp.eq.u32 %p2, %r6, 0;\n\t@%p2 bra DOT_REDUCED;\n"
    "\tsetp.ge.u32 %p3, %r1, %r6;\n\t@%p3 bra DOT_STEP;\n\tshl.b32 %r7, %r6, 2;\n"
    "\tadd.u32 %r8, %r5, %r7;\n\tld.shared.f32 %f4, [%r8];\n\tld.shared.f32 %f5, [%r5];\n"
    "\tadd.f32 %f5, %f5, %f4;\n\tst.shared.f32 [%r5], %f5;\n"
    "DOT_STEP:\n\tbar.sync 0;\n\tshr.u32 %r6, %r6, 1;\n\tbra DOT_REDUCE;\n"
    "DOT_REDUCED:\n\tsetp.ne.u32 %p1, %r1, 0;\n\t@%p1 bra DOT_DONE;\n"
    "\tld.shared.f32 %f6, [%r3];\n\tld.global.f32 %f7, [%rd3];\n"
    "\tsetp.ne.u32 %p2, %r10, 0;\n\t@%p2 bra DOT_RATIO;\n\tdiv.rn.f32 %f2, %f7, %f6;\n"
    "\tst.global.f32 [%rd4], %f2;\n\tbra DOT_DONE;\n"
    "DOT_RATIO:\n\tdiv.rn.f32 %f2, %f6, %f7;\n\tst.global.f32 [%rd4], %f2;\n"
    "\tst.global.f32 [%rd3], %f6;\nDOT_DONE:\n\tret;\n}\n"
    ".visible .entry tf_bench_cg_xr(.param .u64 xr_x, .param .u64 xr_r, .param .u64 xr_p,\n"
    "    .param .u64 xr_ap, .param .u64 xr_alpha, .param .u32 xr_n)\n{\n"
    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<6>;\n\t.reg .f32 %f<8>;\n\t.reg .b64 %rd<16>;\n"
    "\tld.param.u32 %r1, [xr_n];\n\tmov.u32 %r2, %ctaid.x;\n\tmov.u32 %r3, %ntid.x;\n"
    "\tmov.u32 %r4, %tid.x;\n\tmad.lo.s32 %r5, %r2, %r3, %r4;\n\tsetp.ge.u32 %p1, %r5, %r1;\n"
    "\t@%p1 bra XR_DONE;\n\tld.param.u64 %rd1, [xr_x];\n\tld.param.u64 %rd2, [xr_r];\n"
    "\tld.param.u64 %rd3, [xr_p];\n\tld.param.u64 %rd4, [xr_ap];\n"
    "\tld.param.u64 %rd5, [xr_alpha];\n\tcvta.to.global.u64 %rd5, %rd5;\n"
    "\tld.global.f32 %f1, [%rd5];\n\tmul.wide.u32 %rd6, %r5, 4;\n"
    "\tcvta.to.global.u64 %rd1, %rd1;\n\tadd.s64 %rd7, %rd1, %rd6;\n"
    "\tcvta.to.global.u64 %rd2, %rd2;\n\tadd.s64 %rd8, %rd2, %rd6;\n"
    "\tcvta.to.global.u64 %rd3, %rd3;\n\tadd.s64 %rd9, %rd3, %rd6;\n"
    "\tcvta.to.global.u64 %rd4, %rd4;\n\tadd.s64 %rd10, %rd4, %rd6;\n"
    "\tld.global.f32 %f2, [%rd9];\n\tld.global.f32 %f3, [%rd7];\n"
    "\tfma.rn.f32 %f3, %f1, %f2, %f3;\n\tst.global.f32 [%rd7], %f3;\n"
    "\tld.global.f32 %f4, [%rd10];\n\tld.global.f32 %f5, [%rd8];\n\tneg.f32 %f6, %f1;\n"
    "\tfma.rn.f32 %f5, %f6, %f4, %f5;\n\tst.global.f32 [%rd8], %f5;\nXR_DONE:\n\tret;\n}\n"
    ".visible .entry tf_bench_cg_p(.param .u64 pp_p, .param .u64 pp_r, .param .u64 pp_beta,\n"
    "    .param .u32 pp_n)\n{\n"
    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<6>;\n\t.reg .f32 %f<5>;\n\t.reg .b64 %rd<10>;\n"
    "\tld.param.u32 %r1, [pp_n];\n\tmov.u32 %r2, %ctaid.x;\n\tmov.u32 %r3, %ntid.x;\n"
    "\tmov.u32 %r4, %tid.x;\n\tmad.lo.s32 %r5, %r2, %r3, %r4;\n\tsetp.ge.u32 %p1, %r5, %r1;\n"
    "\t@%p1 bra P_DONE;\n\tld.param.u64 %rd1, [pp_p];\n\tld.param.u64 %rd2, [pp_r];\n"
    "\tld.param.u64 %rd3, [pp_beta];\n\tcvta.to.global.u64 %rd3, %rd3;\n"
    "\tld.global.f32 %f1, [%rd3];\n\tmul.wide.u32 %rd4, %r5, 4;\n"
    "\tcvta.to.global.u64 %rd1, %rd1;\n\tadd.s64 %rd5, %rd1, %rd4;\n"
    "\tcvta.to.global.u64 %rd2, %rd2;\n\tadd.s64 %rd6, %rd2, %rd4;\n"
    "\tld.global.f32 %f2, [%rd5];\n\tld.global.f32 %f3, [%rd6];\n"
    "\tfma.rn.f32 %f4, %f1, %f2, %f3;\n\tst.global.f32 [%rd5], %f4;\nP_DONE:\n\tret;\n}\n";

// The raw driver's calls the baselines make (the double has them all).
struct Raw {
    PFN_cuLaunchKernel_v4000 launch;
    PFN_cuMemcpyDtoHAsync_v3020 dtoh;
    PFN_cuMemcpyDtoDAsync_v3020 dtod;
    PFN_cuMemHostAlloc_v2020 host_alloc;
    PFN_cuMemFreeHost_v2000 free_host;
    PFN_cuStreamBeginCapture_v10010 begin;
    PFN_cuStreamEndCapture_v10000 end;
    PFN_cuStreamIsCapturing_v10000 is_capturing;
    PFN_cuGraphInstantiateWithFlags_v11040 instantiate;
    PFN_cuGraphExecUpdate_v12000 update;
    PFN_cuGraphLaunch_v10000 graph_launch;
    PFN_cuGraphExecDestroy_v10000 exec_destroy;
    PFN_cuGraphDestroy_v10000 graph_destroy;
};

Raw load_raw() {
    Raw r{};
    bench::driver_entry("cuLaunchKernel", 4000, &r.launch);
    bench::driver_entry("cuMemcpyDtoHAsync", 3020, &r.dtoh);
    bench::driver_entry("cuMemcpyDtoDAsync", 3020, &r.dtod);
    bench::driver_entry("cuMemHostAlloc", 2020, &r.host_alloc);
    bench::driver_entry("cuMemFreeHost", 2000, &r.free_host);
    bench::driver_entry("cuStreamBeginCapture", 10010, &r.begin);
    bench::driver_entry("cuStreamEndCapture", 10000, &r.end);
    bench::driver_entry("cuStreamIsCapturing", 10000, &r.is_capturing);
    bench::driver_entry("cuGraphInstantiateWithFlags", 11040, &r.instantiate);
    bench::driver_entry("cuGraphExecUpdate", 12000, &r.update);
    bench::driver_entry("cuGraphLaunch", 10000, &r.graph_launch);
    bench::driver_entry("cuGraphExecDestroy", 10000, &r.exec_destroy);
    bench::driver_entry("cuGraphDestroy", 10000, &r.graph_destroy);
    return r;
}

using bench::Sgemm;
using RawBlas = bench::RawCublas;

const float kOne = 1.0f, kZero = 0.0f;
constexpr unsigned kBlock = 256;

// One CG problem: A (the 1-D Laplacian plus 0.001 on the diagonal, dense,
// symmetric positive definite, condition near 4000: no convergence within
// the timed iterations), b = 1, x0 = 0; and the saved start.
struct Cg {
    uint32_t n = 0;
    uint64_t a = 0, x = 0, r = 0, p = 0, ap = 0, rr = 0, alpha = 0, beta = 0;
    uint64_t r0 = 0, rr0 = 0, zeros = 0;
    void *function[3] = {};  // dot, xr, p
};

struct Launch {
    void *function;
    unsigned blocks;
    std::vector<void *> args;
};

// The four kernel launches of one iteration, in order, with their
// parameters (pointers into `store`, which outlives them).
struct Body {
    Launch k[4];
    uint64_t v[16] = {};
    uint32_t n = 0, mode0 = 0, mode1 = 1;
};

void make_body(const Cg &cg, Body *b) {
    uint64_t *v = b->v;
    v[0] = cg.p, v[1] = cg.ap, v[2] = cg.rr, v[3] = cg.alpha;              // dot 1
    v[4] = cg.x, v[5] = cg.r, v[6] = cg.p, v[7] = cg.ap, v[8] = cg.alpha;  // xr
    v[9] = cg.r, v[10] = cg.rr, v[11] = cg.beta;                           // dot 2 (r, r)
    v[12] = cg.p, v[13] = cg.r, v[14] = cg.beta;                           // p
    b->n = cg.n;
    const unsigned blocks = (cg.n + kBlock - 1) / kBlock;
    b->k[0] = {cg.function[0], 1, {&v[0], &v[1], &v[2], &v[3], &b->n, &b->mode0}};
    b->k[1] = {cg.function[1], blocks, {&v[4], &v[5], &v[6], &v[7], &v[8], &b->n}};
    b->k[2] = {cg.function[0], 1, {&v[9], &v[9], &v[10], &v[11], &b->n, &b->mode1}};
    b->k[3] = {cg.function[2], blocks, {&v[12], &v[13], &v[14], &b->n}};
}

struct Gemv {
    Sgemm sgemm;
    uint64_t a, p, ap;
    int n;
};

int32_t gemv(cublasHandle_t h, const Gemv &g) {
    return g.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, g.n, 1, g.n, &kOne,
                   reinterpret_cast<const float *>(g.a), g.n, reinterpret_cast<const float *>(g.p),
                   g.n, &kZero, reinterpret_cast<float *>(g.ap), g.n);
}

int32_t gemv_callback(void *handle, void *, void *user_data) {
    return gemv(static_cast<cublasHandle_t>(handle), *static_cast<const Gemv *>(user_data));
}

tf_launch_config config_of(unsigned blocks) {
    tf_launch_config c;
    tf_launch_config_init(&c, sizeof c);
    c.grid_x = blocks;
    c.block_x = kBlock;
    return c;
}

// Everything the rows share.
struct Bench {
    bool smoke = false;
    bench::RawDriver d{};
    Raw raw{};
    RawBlas blas{};
    tf_runtime *rt = nullptr;
    CUstream stream = nullptr;  // the raw side's own
    cublasHandle_t handle = nullptr;
    float *pinned = nullptr;  // the raw side's scalar read
    tf_module *module = nullptr;
    void *function[3] = {};
};

// The problem of size n in device memory, with its start saved.
Cg make_cg(Bench &b, uint32_t n) {
    Cg cg;
    cg.n = n;
    const size_t vec = size_t(n) * 4;
    std::vector<float> a(size_t(n) * n, 0.0f), ones(n, 1.0f), zeros(n, 0.0f);
    for (uint32_t i = 0; i < n; ++i) {
        a[size_t(i) * n + i] = 2.001f;
        if (i > 0) a[size_t(i) * n + i - 1] = -1.0f;
        if (i + 1 < n) a[size_t(i) * n + i + 1] = -1.0f;
    }
    uint64_t *vecs[] = {&cg.x, &cg.r, &cg.p, &cg.ap, &cg.r0, &cg.zeros};
    bench::ok(tf_alloc(b.rt, a.size() * 4, &cg.a), "tf_alloc");
    for (uint64_t *v : vecs) bench::ok(tf_alloc(b.rt, vec, v), "tf_alloc");
    uint64_t *scalars[] = {&cg.rr, &cg.alpha, &cg.beta, &cg.rr0};
    for (uint64_t *v : scalars) bench::ok(tf_alloc(b.rt, 4, v), "tf_alloc");
    const float rr0 = float(n);
    bench::ok(tf_upload(b.rt, a.data(), cg.a, a.size() * 4), "tf_upload");
    bench::ok(tf_upload(b.rt, ones.data(), cg.r0, vec), "tf_upload");
    bench::ok(tf_upload(b.rt, zeros.data(), cg.zeros, vec), "tf_upload");
    bench::ok(tf_upload(b.rt, &rr0, cg.rr0, 4), "tf_upload");
    bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
    for (int i = 0; i < 3; ++i) cg.function[i] = b.function[i];
    return cg;
}

void free_cg(Bench &b, const Cg &cg) {
    const uint64_t all[] = {cg.a,     cg.x,    cg.r,  cg.p,   cg.ap,   cg.rr,
                            cg.alpha, cg.beta, cg.r0, cg.rr0, cg.zeros};
    for (uint64_t v : all) bench::ok(tf_free(b.rt, v), "tf_free");
}

// x = 0, r = p = b, rr = b.b: the start, on the library's slot (waited for).
void reset(Bench &b, const Cg &cg) {
    const size_t vec = size_t(cg.n) * 4;
    bench::ok(tf_copy(b.rt, cg.zeros, cg.x, vec), "tf_copy");
    bench::ok(tf_copy(b.rt, cg.r0, cg.r, vec), "tf_copy");
    bench::ok(tf_copy(b.rt, cg.r0, cg.p, vec), "tf_copy");
    bench::ok(tf_copy(b.rt, cg.rr0, cg.rr, 4), "tf_copy");
    bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
}

// The ways of running one iteration; each returns r.r after it.
struct Ways {
    Bench &b;
    const Cg &cg;
    Body body;
    Gemv g;
    tf_graph *graph = nullptr;
    CUgraphExec raw_exec = nullptr;

    Ways(Bench &bench, const Cg &c) : b(bench), cg(c) {
        make_body(cg, &body);
        g = Gemv{b.blas.sgemm, cg.a, cg.p, cg.ap, int(cg.n)};
    }

    void lib_body() {
        bench::ok(tf_cublas_enqueue(b.rt, TF_CUBLAS_POINTER_MODE_HOST, gemv_callback, &g),
                  "tf_cublas_enqueue");
        for (Launch &l : body.k) {
            tf_launch_config c = config_of(l.blocks);
            bench::ok(tf_kernel_launch(b.rt, l.function, &c, l.args.data()), "tf_kernel_launch");
        }
    }
    void raw_body() {
        if (gemv(b.handle, g) != 0) bench::die("raw cublasSgemm");
        for (Launch &l : body.k)
            BENCH_CK(b.raw.launch(static_cast<CUfunction>(l.function), l.blocks, 1, 1, kBlock, 1, 1,
                                  0, b.stream, l.args.data(), nullptr));
    }
    float lib_read() {
        float rr = 0;
        bench::ok(tf_download_scalar(b.rt, cg.rr, &rr, 4), "tf_download_scalar");
        return rr;
    }
    float raw_read() {
        BENCH_CK(b.raw.dtoh(b.pinned, cg.rr, 4, b.stream));
        BENCH_CK(b.d.stream_sync(b.stream));
        return *b.pinned;
    }
    void capture() {
        bench::ok(tf_graph_capture_begin(b.rt), "tf_graph_capture_begin");
        lib_body();
        bench::ok(tf_graph_capture_end(b.rt, &graph), "tf_graph_capture_end");
        CUgraph cap = nullptr;
        BENCH_CK(b.raw.begin(b.stream, CU_STREAM_CAPTURE_MODE_RELAXED));
        raw_body();
        BENCH_CK(b.raw.end(b.stream, &cap));
        BENCH_CK(b.raw.instantiate(&raw_exec, cap, 0));
        BENCH_CK(b.raw.graph_destroy(cap));
    }
    ~Ways() {
        tf_graph_release(graph);
        if (raw_exec) b.raw.exec_destroy(raw_exec);
    }

    float lib() { return lib_body(), lib_read(); }
    float lib_graph() {
        bench::ok(tf_graph_launch(b.rt, graph), "tf_graph_launch");
        return lib_read();
    }
    float raw_plain() { return raw_body(), raw_read(); }
    float raw_graph() {
        BENCH_CK(b.raw.graph_launch(raw_exec, b.stream));
        return raw_read();
    }
};

constexpr float kTolerance = 1e-30f;  // a convergence test that must not stop the timing

// ns per iteration of `iters` iterations from the start; the read's value
// is the convergence test.
template <class Iteration>
double sample(Bench &b, const Cg &cg, int iters, Iteration &&iteration) {
    reset(b, cg);
    auto t0 = bench::clk::now();
    for (int i = 0; i < iters; ++i)
        if (iteration() < kTolerance) break;
    return bench::ns_since(t0) / iters;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Every way gives the same r.r after each of `iters` iterations, bit for bit.
void check_ways_agree(Bench &b, Ways &w, int iters) {
    typedef float (Ways::*Way)();
    const Way ways[] = {&Ways::lib, &Ways::lib_graph, &Ways::raw_plain, &Ways::raw_graph};
    const char *names[] = {"library", "library graph", "raw", "raw graph"};
    std::vector<float> first;
    for (int k = 0; k < 4; ++k) {
        std::vector<float> got;
        reset(b, w.cg);
        for (int i = 0; i < iters; ++i) got.push_back((w.*ways[k])());
        if (k == 0) first = got;
        if (std::memcmp(got.data(), first.data(), got.size() * 4) != 0) {
            std::fprintf(stderr, "bench: CG n=%u: the %s computed other values than the library\n",
                         w.cg.n, names[k]);
            std::exit(1);
        }
    }
    if (!(first.back() < first.front()) || !(first.back() > kTolerance)) {
        std::fprintf(stderr, "bench: CG n=%u: r.r went from %g to %g\n", w.cg.n, first.front(),
                     first.back());
        std::exit(1);
    }
}

void cg_rows(Bench &b, uint32_t n) {
    Cg cg = make_cg(b, n);
    {
        Ways w(b, cg);
        w.capture();
        check_ways_agree(b, w, b.smoke ? 3 : 20);
        const int iters = b.smoke ? 2 : n <= 512 ? 200 : 50, reps = b.smoke ? 1 : 15;
        std::vector<double> lib, lib_graph, raw, raw_graph;
        for (int r = 0; r < reps; ++r) {
            lib.push_back(sample(b, cg, iters, [&] { return w.lib(); }));
            lib_graph.push_back(sample(b, cg, iters, [&] { return w.lib_graph(); }));
            raw.push_back(sample(b, cg, iters, [&] { return w.raw_plain(); }));
            raw_graph.push_back(sample(b, cg, iters, [&] { return w.raw_graph(); }));
        }
        const double l = median(lib), lg = median(lib_graph), rw = median(raw),
                     rg = median(raw_graph);
        const std::string id = "cg" + std::to_string(n), at = " at n = " + std::to_string(n);
        bench::report(id + "_nograph", "CG iteration" + at + ", library without a graph", l,
                      "raw driver, same kernels and cuBLAS, copy + sync read", rw, "ns",
                      "<= 1.0x raw", l <= rw);
        const double goal = n == 512 ? 0.55 : 1.0;
        char goal_text[32];
        std::snprintf(goal_text, sizeof goal_text, "<= %.2fx", goal);
        bench::report(id + "_graph", "CG iteration" + at + ", body as a graph + tf_download_scalar",
                      lg, "the library without a graph", l, "ns", goal_text, lg <= goal * l);
        bench::report(id + "_graph_vs_raw_graph",
                      "CG iteration" + at + ", library graph + tf_download_scalar", lg,
                      "raw driver with its own graph, copy + sync read", rg, "ns", "<= 0.8x raw",
                      lg <= 0.8 * rg);
        bench::info((id + "_raw_graph_ns").c_str(), std::to_string(rg));
        std::printf(
            "COMPARE|%s_vs_torch_graph|CG iteration%s, library graph vs torch.cuda.graph "
            "+ .item()|%s_graph|torch_cg%u_graph|0.6\n",
            id.c_str(), at.c_str(), id.c_str(), n);
        std::fflush(stdout);
    }
    free_cg(b, cg);
}

// ---- a 10-kernel graph --------------------------------------------------------

constexpr int kTen = 10;

// Ten p = r + beta p launches over two buffer sets, on the library's slot
// (lib) or the raw stream.
struct Ten {
    Bench &b;
    uint64_t p[2] = {}, r = 0, beta = 0;
    uint32_t n = 256;
    std::vector<void *> args[2];

    explicit Ten(Bench &bench) : b(bench) {
        const std::vector<float> zeros(n, 0.0f);
        for (uint64_t *v : {&p[0], &p[1], &r}) {
            bench::ok(tf_alloc(b.rt, n * 4, v), "tf_alloc");
            bench::ok(tf_upload(b.rt, zeros.data(), *v, n * 4), "tf_upload");
        }
        bench::ok(tf_alloc(b.rt, 4, &beta), "tf_alloc");
        bench::ok(tf_upload(b.rt, zeros.data(), beta, 4), "tf_upload");
        bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
        for (int s = 0; s < 2; ++s) args[s] = {&p[s], &r, &beta, &n};
    }
    ~Ten() {
        for (uint64_t v : {p[0], p[1], r, beta}) bench::ok(tf_free(b.rt, v), "tf_free");
    }
    void lib(int set) {
        tf_launch_config c = config_of(1);
        for (int i = 0; i < kTen; ++i)
            bench::ok(tf_kernel_launch(b.rt, b.function[2], &c, args[set].data()),
                      "tf_kernel_launch");
    }
    void raw(int set) {
        for (int i = 0; i < kTen; ++i)
            BENCH_CK(b.raw.launch(static_cast<CUfunction>(b.function[2]), 1, 1, 1, kBlock, 1, 1, 0,
                                  b.stream, args[set].data(), nullptr));
    }
};

void launch_rows(Bench &b) {
    Ten ten(b);
    tf_graph *g = nullptr;
    bench::ok(tf_graph_capture_begin(b.rt), "tf_graph_capture_begin");
    ten.lib(0);
    bench::ok(tf_graph_capture_end(b.rt, &g), "tf_graph_capture_end");
    CUgraph cap = nullptr;
    CUgraphExec x = nullptr;
    BENCH_CK(b.raw.begin(b.stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    ten.raw(0);
    BENCH_CK(b.raw.end(b.stream, &cap));
    BENCH_CK(b.raw.instantiate(&x, cap, 0));
    BENCH_CK(b.raw.graph_destroy(cap));

    const int burst = b.smoke ? 2 : 20, reps = b.smoke ? 1 : 41;
    std::vector<double> lib, raw;
    for (int r = 0; r < reps; ++r) {
        auto t0 = bench::clk::now();
        for (int i = 0; i < burst; ++i) bench::ok(tf_graph_launch(b.rt, g), "tf_graph_launch");
        lib.push_back(bench::ns_since(t0) / burst);
        bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync");
        t0 = bench::clk::now();
        for (int i = 0; i < burst; ++i) BENCH_CK(b.raw.graph_launch(x, b.stream));
        raw.push_back(bench::ns_since(t0) / burst);
        BENCH_CK(b.d.stream_sync(b.stream));
    }
    double l = median(lib), rw = median(raw);
    bench::report("graph_launch_10", "tf_graph_launch of a 10-kernel graph, bursts of 20", l,
                  "raw cuGraphLaunch of the same graph", rw, "ns", "<= 1.05x raw", l <= 1.05 * rw);

    // The end of a capture of the same 10 kernels on the other buffers.
    const int updates = b.smoke ? 2 : 201;
    std::vector<double> upd, inst, raw_upd;
    for (int r = 0; r < updates; ++r) {
        const int set = (r + 1) % 2;
        int32_t in_place = -1;
        bench::ok(tf_graph_capture_begin(b.rt), "tf_graph_capture_begin");
        ten.lib(set);
        auto t0 = bench::clk::now();
        bench::ok(tf_graph_capture_update(b.rt, g, &in_place), "tf_graph_capture_update");
        upd.push_back(bench::ns_since(t0));
        if (in_place != 1) bench::die("tf_graph_capture_update did not update in place");

        BENCH_CK(b.raw.begin(b.stream, CU_STREAM_CAPTURE_MODE_RELAXED));
        ten.raw(set);
        t0 = bench::clk::now();
        CUgraphExec fresh = nullptr;
        BENCH_CK(b.raw.end(b.stream, &cap));
        BENCH_CK(b.raw.instantiate(&fresh, cap, 0));
        BENCH_CK(b.raw.exec_destroy(x));
        BENCH_CK(b.raw.graph_destroy(cap));
        inst.push_back(bench::ns_since(t0));
        x = fresh;

        BENCH_CK(b.raw.begin(b.stream, CU_STREAM_CAPTURE_MODE_RELAXED));
        ten.raw(set);
        t0 = bench::clk::now();
        CUgraphExecUpdateResultInfo info{};
        BENCH_CK(b.raw.end(b.stream, &cap));
        BENCH_CK(b.raw.update(x, cap, &info));
        BENCH_CK(b.raw.graph_destroy(cap));
        raw_upd.push_back(bench::ns_since(t0));
    }
    l = median(upd), rw = median(inst);
    bench::report("graph_update_10",
                  "tf_graph_capture_update of a 10-kernel capture, pointers changed (in place)", l,
                  "cuStreamEndCapture + cuGraphInstantiateWithFlags + destroys", rw, "ns",
                  "<= 0.2x", l <= 0.2 * rw);
    bench::info("graph_update_10_raw_update_ns", std::to_string(median(raw_upd)));
    BENCH_CK(b.raw.exec_destroy(x));
    bench::ok(tf_graph_release(g), "tf_graph_release");
}

// What detecting a capture begun by hand costs (docs/graphs.md).
void capture_check_info(Bench &b) {
    void *slot_stream = nullptr;
    bench::ok(tf_runtime_stream(b.rt, &slot_stream), "tf_runtime_stream");
    const int iters = b.smoke ? 10 : 100000, reps = b.smoke ? 1 : 9;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    double is = bench::median_ns_per(
        iters, reps, [&] { b.raw.is_capturing(static_cast<CUstream>(slot_stream), &st); });
    double sync = bench::median_ns_per(
        iters / 10, reps, [&] { bench::ok(tf_runtime_sync(b.rt), "tf_runtime_sync"); });
    double raw_sync = bench::median_ns_per(iters / 10, reps, [&] { b.d.stream_sync(b.stream); });
    bench::info("stream_is_capturing_ns", std::to_string(is));
    bench::info("runtime_sync_idle_ns", std::to_string(sync));
    bench::info("raw_stream_sync_idle_ns", std::to_string(raw_sync));
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
    b.d = bench::load_raw_driver();
    b.raw = load_raw();
    b.blas = bench::load_raw_cublas();
    if (tf_runtime_new(0, &b.rt) != TF_OK) bench::die("tf_runtime_new");
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    bench::ok(tf_runtime_device_info(b.rt, &p), "tf_runtime_device_info");
    int driver = 0;
    b.d.driver_version(&driver);
    bench::info("device", p.name);
    bench::info("driver", std::to_string(driver));
    void *primary = nullptr;
    bench::ok(tf_runtime_primary_context(b.rt, &primary), "tf_runtime_primary_context");
    BENCH_CK(b.d.set_current(static_cast<CUcontext>(primary)));
    bench::ok(tf_module_load(b.rt, kCgPtx, sizeof kCgPtx, &b.module), "tf_module_load");
    const char *names[] = {"tf_bench_cg_dot", "tf_bench_cg_xr", "tf_bench_cg_p"};
    for (int i = 0; i < 3; ++i)
        bench::ok(tf_module_function(b.module, names[i], &b.function[i]), "tf_module_function");
    BENCH_CK(b.d.stream_create(&b.stream, CU_STREAM_NON_BLOCKING));
    void *pinned = nullptr;
    BENCH_CK(b.raw.host_alloc(&pinned, 64, 0));
    b.pinned = static_cast<float *>(pinned);
    // A raw handle configured as the library configures its slots' handles.
    const size_t workspace_bytes = TF_DEFAULT_CUBLAS_WORKSPACE_BYTES;
    CUdeviceptr ws = 0;
    BENCH_CK(b.d.mem_alloc(&ws, workspace_bytes));
    if (b.blas.create(&b.handle) != 0 ||
        b.blas.set_stream(b.handle, reinterpret_cast<cudaStream_t>(b.stream)) != 0 ||
        b.blas.set_workspace(b.handle, reinterpret_cast<void *>(ws), workspace_bytes) != 0)
        bench::die("raw cublasCreate");

    const std::vector<uint32_t> sizes =
        b.smoke ? std::vector<uint32_t>{64} : std::vector<uint32_t>{512, 8192};
    for (uint32_t n : sizes) cg_rows(b, n);
    launch_rows(b);
    capture_check_info(b);

    b.blas.destroy(b.handle);
    BENCH_CK(b.raw.free_host(pinned));
    BENCH_CK(b.d.set_current(nullptr));
    bench::ok(tf_module_release(b.module), "tf_module_release");
    tf_runtime_release(b.rt);
    return 0;
}
