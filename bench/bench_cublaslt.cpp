// SPDX-License-Identifier: MIT OR Apache-2.0
// Small SGEMMs through tf_cublaslt_enqueue with a plan the caller caches,
// against raw cublasLtMatmul with a cached plan and tf_cublas_enqueue +
// cublasSgemm, in one process, at n = 64, 128 and 256 (issue 19, item 3).
// The torch.mm(out=) peers come from bench/torch_cublas.py; the COMPARE
// lines printed here give tools/gpu/bench_report.py the ratios to them.
//
//   bench_cublaslt          a GPU machine
//   bench_cublaslt --smoke  n = 8, a few calls per variant, against the driver
//                           double; fails unless every variant computed the
//                           product (make bench-cublaslt-smoke)
//
// Every variant computes C = A B (n x n, column-major float) on the same
// operands and is checked against the host's product before it is timed.
// Like for like: the raw side's cuBLASLt is the library's own instance
// (tf_cublaslt_symbol), its handle gets a workspace of the library's default
// size (TF_DEFAULT_CUBLAS_WORKSPACE_BYTES) and its plan is made the same way
// with that workspace limit.  Two regimes, as in bench_cublas: sustained
// (2000 calls in a row: the launch queue fills) and bursts of 200 drained
// between samples (what one call costs the host).  The variants take turns
// in every round of samples.
#include <cublasLt.h>
#include <cublas_api.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

template <class Fn>
void lt_fn(const char *name, Fn *out) {
    void *f = nullptr;
    bench::ok(tf_cublaslt_symbol(name, &f), name);
    std::memcpy(static_cast<void *>(out), &f, sizeof f);
}

template <class Fn>
void cublas_fn(const char *name, Fn *out) {
    void *f = nullptr;
    bench::ok(tf_cublas_symbol(name, &f), name);
    std::memcpy(static_cast<void *>(out), &f, sizeof f);
}

// The functions of the library's own cuBLASLt and cuBLAS.
struct Api {
    decltype(&cublasLtCreate) create;
    decltype(&cublasLtMatmulDescCreate) desc_create;
    decltype(&cublasLtMatrixLayoutCreate) layout_create;
    decltype(&cublasLtMatmulPreferenceCreate) pref_create;
    decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set;
    decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
    decltype(&cublasLtMatmul) matmul;
    decltype(&cublasSgemm_v2) sgemm;
};

Api load_api() {
    Api a{};
    lt_fn("cublasLtCreate", &a.create);
    lt_fn("cublasLtMatmulDescCreate", &a.desc_create);
    lt_fn("cublasLtMatrixLayoutCreate", &a.layout_create);
    lt_fn("cublasLtMatmulPreferenceCreate", &a.pref_create);
    lt_fn("cublasLtMatmulPreferenceSetAttribute", &a.pref_set);
    lt_fn("cublasLtMatmulAlgoGetHeuristic", &a.heuristic);
    lt_fn("cublasLtMatmul", &a.matmul);
    cublas_fn("cublasSgemm_v2", &a.sgemm);
    return a;
}

const float kOne = 1.0f, kZero = 0.0f;

// What cublasLtMatmul needs but the operands, made once per handle (the
// descriptors are left to the process's end, as a caller's cache would be).
struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t layout = nullptr;  // A, B and C alike: n x n, ld n
    cublasLtMatmulHeuristicResult_t result{};
    void *handle = nullptr;
};

int make_plan(const Api &a, void *handle, int n, uint64_t workspace, Plan *p) {
    cublasLtMatmulPreference_t pref = nullptr;
    int found = 0;
    int st = a.desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (!st) st = a.layout_create(&p->layout, CUDA_R_32F, n, n, n);
    if (!st) st = a.pref_create(&pref);
    if (!st)
        st = a.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                        sizeof workspace);
    if (!st)
        st = a.heuristic(static_cast<cublasLtHandle_t>(handle), p->desc, p->layout, p->layout,
                         p->layout, p->layout, pref, 1, &p->result, &found);
    if (!st && found == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
    p->handle = handle;
    return st;
}

struct Operands {
    int n;
    uint64_t a, b, c;
};

int lt_matmul(const Api &api, const Plan &p, const Operands &o, uint64_t workspace, uint64_t bytes,
              void *stream) {
    auto f = [](uint64_t x) { return reinterpret_cast<void *>(x); };
    return api.matmul(static_cast<cublasLtHandle_t>(p.handle), p.desc, &kOne, f(o.a), p.layout,
                      f(o.b), p.layout, &kZero, f(o.c), p.layout, f(o.c), p.layout, &p.result.algo,
                      f(workspace), bytes, static_cast<cudaStream_t>(stream));
}

// tf_cublaslt_enqueue's user data: the plan is made at the first call.
struct LtCall {
    const Api *api;
    const Operands *o;
    Plan plan;
    static int32_t run(void *h, void *stream, uint64_t ws, uint64_t bytes, void *self) {
        LtCall &c = *static_cast<LtCall *>(self);
        if (c.plan.handle != h) {
            int st = make_plan(*c.api, h, c.o->n, bytes, &c.plan);
            if (st) return st;
        }
        return lt_matmul(*c.api, c.plan, *c.o, ws, bytes, stream);
    }
};

struct SgemmCall {
    const Api *api;
    const Operands *o;
    static int32_t run(void *h, void *, void *self) {
        const SgemmCall &c = *static_cast<const SgemmCall *>(self);
        const int n = c.o->n;
        auto f = [](uint64_t x) { return reinterpret_cast<float *>(x); };
        return c.api->sgemm(static_cast<cublasHandle_t>(h), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n,
                            &kOne, f(c.o->a), n, f(c.o->b), n, &kZero, f(c.o->c), n);
    }
};

struct Variant {
    std::function<void()> call, drain;
    std::vector<double> samples;
    double median() {
        std::sort(samples.begin(), samples.end());
        return samples[samples.size() / 2];
    }
};

// `reps` rounds; in each, every variant takes one sample of `iters` calls
// and is drained outside the timing.
void measure(std::vector<Variant> &vs, int iters, int reps) {
    for (auto &v : vs) v.samples.clear();
    for (int r = 0; r < reps; ++r)
        for (auto &v : vs) {
            v.samples.push_back(bench::median_ns_per(iters, 1, v.call));
            v.drain();
        }
}

// A and B hold small integers: every product is exact and checked bit for bit.
void fill(tf_runtime *rt, const Operands &o, std::vector<float> *want) {
    const int n = o.n;
    std::vector<float> a(n * n), b(n * n);
    for (int i = 0; i < n * n; ++i) a[i] = float(i % 7 - 3), b[i] = float(i % 5 - 2);
    want->assign(n * n, 0.0f);
    for (int col = 0; col < n; ++col)
        for (int row = 0; row < n; ++row)
            for (int k = 0; k < n; ++k) (*want)[row + col * n] += a[row + k * n] * b[k + col * n];
    bench::ok(tf_upload(rt, a.data(), o.a, a.size() * 4), "tf_upload");
    bench::ok(tf_upload(rt, b.data(), o.b, b.size() * 4), "tf_upload");
    bench::ok(tf_runtime_sync(rt), "tf_runtime_sync");  // before the raw stream reads them
}

void check(tf_runtime *rt, const Operands &o, const std::vector<float> &want, const char *what) {
    std::vector<float> got(want.size(), -1.0f), zero(want.size(), 0.0f);
    bench::ok(tf_runtime_sync(rt), "tf_runtime_sync");
    bench::ok(tf_download(rt, o.c, got.data(), got.size() * 4), "tf_download");
    if (std::memcmp(got.data(), want.data(), got.size() * 4) != 0) {
        std::fprintf(stderr, "bench: %s at n = %d computed a wrong product (c[0] %g, want %g)\n",
                     what, o.n, got[0], want[0]);
        std::exit(1);
    }
    // tf_upload may return before the copy ran: the raw stream is not
    // ordered after the library's, so wait for it.
    bench::ok(tf_upload(rt, zero.data(), o.c, zero.size() * 4), "tf_upload");
    bench::ok(tf_runtime_sync(rt), "tf_runtime_sync");
}

struct Raw {
    bench::RawDriver d;
    CUstream stream = nullptr;
    void *handle = nullptr;  // a cublasLtHandle_t
    CUdeviceptr workspace = 0;
    uint64_t bytes = TF_DEFAULT_CUBLAS_WORKSPACE_BYTES;
};

void run_size(tf_runtime *rt, const Api &api, Raw &raw, int n, bool smoke) {
    Operands o{n, 0, 0, 0};
    const size_t bytes = sizeof(float) * n * n;
    for (uint64_t *p : {&o.a, &o.b, &o.c}) bench::ok(tf_alloc(rt, bytes, p), "tf_alloc");
    std::vector<float> want;
    fill(rt, o, &want);
    LtCall lt{&api, &o, {}};
    SgemmCall sg{&api, &o};
    Plan raw_plan;
    if (make_plan(api, raw.handle, n, raw.bytes, &raw_plan) != 0) bench::die("raw plan");
    auto lib_lt = [&] {
        bench::ok(tf_cublaslt_enqueue(rt, LtCall::run, &lt), "tf_cublaslt_enqueue");
    };
    auto raw_lt = [&] {
        if (lt_matmul(api, raw_plan, o, raw.workspace, raw.bytes, raw.stream) != 0)
            bench::die("cublasLtMatmul");
    };
    auto lib_sgemm = [&] {
        bench::ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, SgemmCall::run, &sg),
                  "tf_cublas_enqueue");
    };
    auto lib_sync = [&] { bench::ok(tf_runtime_sync(rt), "tf_runtime_sync"); };
    auto raw_sync = [&] { BENCH_CK(raw.d.stream_sync(raw.stream)); };
    lib_lt(), check(rt, o, want, "tf_cublaslt_enqueue");
    raw_lt(), raw_sync(), check(rt, o, want, "raw cublasLtMatmul");
    lib_sgemm(), check(rt, o, want, "tf_cublas_enqueue");
    std::vector<Variant> vs = {
        {lib_lt, lib_sync, {}}, {raw_lt, raw_sync, {}}, {lib_sgemm, lib_sync, {}}};
    const std::string s = std::to_string(n);
    struct Regime {
        const char *suffix, *what;
        int iters, reps;
    };
    const Regime regimes[] = {
        {"", "sustained (queue full)", smoke ? 4 : 2000, smoke ? 3 : 15},
        {"_burst", "bursts of 200 (CPU cost)", smoke ? 4 : 200, smoke ? 3 : 41}};
    for (const Regime &r : regimes) {
        for (int i = 0; i < (smoke ? 2 : 300); ++i) lib_lt(), raw_lt(), lib_sgemm();
        lib_sync(), raw_sync();
        measure(vs, r.iters, r.reps);
        const double l = vs[0].median(), w = vs[1].median(), c = vs[2].median();
        const std::string id = "lt_sgemm" + s + r.suffix;
        const std::string what = "tf_cublaslt_enqueue SGEMM " + s + ", plan cached, " + r.what;
        bench::report(id, what, l, "raw cublasLtMatmul, plan cached", w, "ns", "<= 1.03x raw",
                      l <= 1.03 * w);
        bench::report(id + "_vs_cublas", what, l, "tf_cublas_enqueue + cublasSgemm", c, "ns",
                      "<= 1.0x", l <= c);
        std::printf(
            "COMPARE|%s_vs_torch|tf_cublaslt_enqueue SGEMM %s vs torch.mm(out=) %s, %s|"
            "%s|torch_mm%s%s|1.0\n",
            id.c_str(), s.c_str(), s.c_str(), r.what, id.c_str(), s.c_str(), r.suffix);
    }
    check(rt, o, want, "the timed calls");
    for (uint64_t p : {o.a, o.b, o.c}) bench::ok(tf_free(rt, p), "tf_free");
}

}  // namespace

int main(int argc, char **argv) {
    const bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
    Raw raw;
    raw.d = bench::load_raw_driver();
    tf_runtime *rt = nullptr;
    if (tf_runtime_new(0, &rt) != TF_OK) bench::die("tf_runtime_new");
    const Api api = load_api();
    void *primary = nullptr;
    bench::ok(tf_runtime_primary_context(rt, &primary), "tf_runtime_primary_context");
    BENCH_CK(raw.d.set_current(static_cast<CUcontext>(primary)));
    BENCH_CK(raw.d.stream_create(&raw.stream, CU_STREAM_NON_BLOCKING));
    BENCH_CK(raw.d.mem_alloc(&raw.workspace, raw.bytes));
    cublasLtHandle_t h = nullptr;
    if (api.create(&h) != 0) bench::die("cublasLtCreate");
    raw.handle = h;
    size_t (*version)() = nullptr;
    lt_fn("cublasLtGetVersion", &version);
    bench::info("cublaslt", std::to_string(version()));
    for (int n : smoke ? std::vector<int>{8} : std::vector<int>{64, 128, 256})
        run_size(rt, api, raw, n, smoke);
    BENCH_CK(raw.d.set_current(nullptr));
    tf_runtime_release(rt);
    return 0;
}
