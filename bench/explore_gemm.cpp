// SPDX-License-Identifier: MIT OR Apache-2.0
// Where the host time of a small SGEMM goes (issue 19, item 3): cuBLAS
// reached by each path PyTorch or the library could take, raw and through
// tf_cublas_enqueue, in one process, on the same operands.  An exploration,
// not a goal row: it prints EXPLORE lines, and run-bench does not run it
// (tools/gpu/gpu-explore-gemm runs it, bench/torch_gemm_explore.py beside
// it, and then this program again on PyTorch's own cuBLAS).
//
//   explore_gemm           n = 64, 128, 256 (a GPU machine)
//   explore_gemm --smoke   n = 8, a few calls per variant: runs against the
//                          driver double and its cuBLAS and cuBLASLt, and fails
//                          unless every variant ran and computed the product
//
// Every variant computes C = A B (n x n, column-major float) and is checked
// against the host's product once before it is timed.  Two regimes, as in
// bench_cublas: sustained (2000 calls in a row: the launch queue fills, a
// call returns at the pace the device drains them) and bursts of 200 drained
// between samples (what one call costs the host).  The variants take turns
// in every round of samples, so drift spreads over all of them.
//
// cuBLAS: TENFERRO_GPU_CUBLAS, else libcublas.so.13, else .12: the one the
// library loads, so both sides call one instance.  cuBLASLt:
// TENFERRO_GPU_CUBLASLT, else the libcublasLt.so.13 (.12) cuBLAS itself
// loaded (RTLD_NOLOAD), else the one in cuBLAS's folder (the driver
// double's): never another one.
//
//   EXPLORE|n|variant|sustained ns|burst ns|what     (ns 0: skipped, see INFO)
//   INFO|key|value
#include <cublasLt.h>
#include <cublas_api.h>
#include <link.h>

#include <cstring>
#include <functional>
#include <memory>

#include "bench_util.h"

namespace {

template <class Fn>
bool sym(void *lib, const char *name, Fn *out) {
    void *p = lib ? dlsym(lib, name) : nullptr;
    std::memcpy(static_cast<void *>(out), &p, sizeof p);
    return p != nullptr;
}

std::string path_of(void *lib) {
    struct link_map *map = nullptr;
    if (!lib || dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || !map) return "?";
    return map->l_name;
}

// An absolute path from the environment, else the SONAMEs in turn.
void *open_library(const char *env, const char *const *sonames, int flags) {
    const char *path = std::getenv(env);
    if (path && *path) return dlopen(path, RTLD_NOW | RTLD_LOCAL);
    for (const char *const *s = sonames; *s; ++s)
        if (void *h = dlopen(*s, RTLD_NOW | RTLD_LOCAL | flags)) return h;
    return nullptr;
}

struct Cublas {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    decltype(&cublasSetPointerMode_v2) set_pointer_mode;
    decltype(&cublasSgemm_v2) sgemm;
    decltype(&cublasGetProperty) get_property;
    // Optional: the variants that need them are skipped without them.
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSetAtomicsMode) set_atomics_mode;
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                              const void *, const void *, cudaDataType, int, const void *,
                              cudaDataType, int, const void *, void *, cudaDataType, int,
                              cublasComputeType_t, cublasGemmAlgo_t);
    void *lib;
};

Cublas load_cublas() {
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", nullptr};
    Cublas c{};
    c.lib = open_library("TENFERRO_GPU_CUBLAS", names, 0);
    if (!sym(c.lib, "cublasCreate_v2", &c.create) || !sym(c.lib, "cublasDestroy_v2", &c.destroy) ||
        !sym(c.lib, "cublasSetStream_v2", &c.set_stream) ||
        !sym(c.lib, "cublasSetWorkspace_v2", &c.set_workspace) ||
        !sym(c.lib, "cublasSetPointerMode_v2", &c.set_pointer_mode) ||
        !sym(c.lib, "cublasSgemm_v2", &c.sgemm) ||
        !sym(c.lib, "cublasGetProperty", &c.get_property)) {
        std::fprintf(stderr, "bench: no usable cuBLAS: %s\n",
                     c.lib ? "symbols missing" : dlerror());
        std::exit(1);
    }
    sym(c.lib, "cublasSetMathMode", &c.set_math_mode);
    sym(c.lib, "cublasSetAtomicsMode", &c.set_atomics_mode);
    sym(c.lib, "cublasGemmEx", &c.gemm_ex);
    return c;
}

struct CublasLt {
    decltype(&cublasLtCreate) create;
    decltype(&cublasLtDestroy) destroy;
    decltype(&cublasLtGetVersion) version;
    decltype(&cublasLtMatmulDescCreate) desc_create;
    decltype(&cublasLtMatmulDescDestroy) desc_destroy;
    decltype(&cublasLtMatmulDescSetAttribute) desc_set;
    decltype(&cublasLtMatrixLayoutCreate) layout_create;
    decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
    decltype(&cublasLtMatmulPreferenceCreate) pref_create;
    decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy;
    decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set;
    decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
    decltype(&cublasLtMatmul) matmul;
    void *lib;
    bool usable;
};

// TENFERRO_GPU_CUBLASLT, else the cuBLASLt cuBLAS loaded, else the one
// beside cuBLAS (the driver double's cuBLAS loads none): never another one.
CublasLt load_cublaslt(const Cublas &cb) {
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", nullptr};
    CublasLt l{};
    l.lib = open_library("TENFERRO_GPU_CUBLASLT", names, RTLD_NOLOAD);
    const std::string dir = path_of(cb.lib).substr(0, path_of(cb.lib).rfind('/') + 1);
    for (const char *const *s = names; !l.lib && !std::getenv("TENFERRO_GPU_CUBLASLT") && *s; ++s)
        if (!dir.empty()) l.lib = dlopen((dir + *s).c_str(), RTLD_NOW | RTLD_LOCAL);
    l.usable = sym(l.lib, "cublasLtCreate", &l.create) &&
               sym(l.lib, "cublasLtDestroy", &l.destroy) &&
               sym(l.lib, "cublasLtGetVersion", &l.version) &&
               sym(l.lib, "cublasLtMatmulDescCreate", &l.desc_create) &&
               sym(l.lib, "cublasLtMatmulDescDestroy", &l.desc_destroy) &&
               sym(l.lib, "cublasLtMatmulDescSetAttribute", &l.desc_set) &&
               sym(l.lib, "cublasLtMatrixLayoutCreate", &l.layout_create) &&
               sym(l.lib, "cublasLtMatrixLayoutDestroy", &l.layout_destroy) &&
               sym(l.lib, "cublasLtMatmulPreferenceCreate", &l.pref_create) &&
               sym(l.lib, "cublasLtMatmulPreferenceDestroy", &l.pref_destroy) &&
               sym(l.lib, "cublasLtMatmulPreferenceSetAttribute", &l.pref_set) &&
               sym(l.lib, "cublasLtMatmulAlgoGetHeuristic", &l.heuristic) &&
               sym(l.lib, "cublasLtMatmul", &l.matmul);
    return l;
}

struct Mem {
    PFN_cuMemcpyHtoD_v3020 htod;
    PFN_cuMemcpyDtoH_v3020 dtoh;
    PFN_cuMemFree_v3020 free;
};

const float kOne = 1.0f, kZero = 0.0f;

// The operands of one size: A and B hold small integers, so every product,
// TF32 included, is exact and each variant's C is compared bit for bit.
struct Operands {
    int n;
    CUdeviceptr a, b, c;
    std::vector<float> want;
    const float *fa() const { return reinterpret_cast<const float *>(a); }
    const float *fb() const { return reinterpret_cast<const float *>(b); }
    float *fc() const { return reinterpret_cast<float *>(c); }
};

// ---- cuBLASLt plans ------------------------------------------------------------

// Everything cublasLtMatmul needs but the operands: made once (cached) or
// per call (rebuilt), as PyTorch's bgemm_internal_cublaslt does.
struct LtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t layout = nullptr;  // A, B and C are alike: n x n, ld n
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t result{};
};

void destroy_plan(const CublasLt &lt, LtPlan *p) {
    if (p->pref) lt.pref_destroy(p->pref);
    if (p->layout) lt.layout_destroy(p->layout);
    if (p->desc) lt.desc_destroy(p->desc);
    *p = LtPlan{};
}

// 0, or the failing cublasStatus_t (CUBLAS_STATUS_NOT_SUPPORTED: no algorithm).
int make_plan(const CublasLt &lt, cublasLtHandle_t h, int n, size_t workspace, LtPlan *p) {
    const cublasOperation_t op = CUBLAS_OP_N;
    const uint32_t align = 256;  // cuMemAlloc's, what PyTorch reads off its pointers
    int st = lt.desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (!st) st = lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op);
    if (!st) st = lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op, sizeof op);
    if (!st) st = lt.layout_create(&p->layout, CUDA_R_32F, n, n, n);
    if (!st) st = lt.pref_create(&p->pref);
    if (!st)
        st = lt.pref_set(p->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                         sizeof workspace);
    const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES};
    for (auto attr : aligns)
        if (!st) st = lt.pref_set(p->pref, attr, &align, sizeof align);
    int found = 0;
    if (!st)
        st = lt.heuristic(h, p->desc, p->layout, p->layout, p->layout, p->layout, p->pref, 1,
                          &p->result, &found);
    if (!st && found == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
    return st;
}

int lt_matmul(const CublasLt &lt, cublasLtHandle_t h, const LtPlan &p, const Operands &o,
              CUdeviceptr workspace, size_t bytes, CUstream stream) {
    return lt.matmul(h, p.desc, &kOne, o.fa(), p.layout, o.fb(), p.layout, &kZero, o.fc(), p.layout,
                     o.fc(), p.layout, &p.result.algo, reinterpret_cast<void *>(workspace), bytes,
                     reinterpret_cast<cudaStream_t>(stream));
}

// ---- variants --------------------------------------------------------------------

struct Variant {
    std::string id, what;
    std::function<int()> call;   // one GEMM; nonzero: its failure
    std::function<int()> drain;  // waits for what was queued
    std::string skipped;         // why it does not run, or ""
    std::vector<double> sustained, burst;
};

// What one size's variants share, and own.
struct Setup {
    bench::RawDriver d;
    Mem mem;
    Cublas cb;
    CublasLt lt;
    tf_runtime *rt, *rt_ws0;  // default options; cublas_workspace_bytes = 0
    CUstream stream;          // the raw side's
    Operands o;
    std::vector<cublasHandle_t> handles;
    std::vector<cublasLtHandle_t> lt_handles;
    std::vector<CUdeviceptr> buffers;
    std::vector<std::unique_ptr<LtPlan>> plans;
};

constexpr size_t MiB = size_t(1) << 20;
constexpr size_t kLibraryWorkspace = TF_DEFAULT_CUBLAS_WORKSPACE_BYTES;  // 32 MiB
constexpr size_t kLtWorkspace = 1 * MiB;  // PyTorch's CUBLASLT_WORKSPACE_SIZE default

CUdeviceptr buffer(Setup &s, size_t bytes) {
    CUdeviceptr p = 0;
    BENCH_CK(s.d.mem_alloc(&p, bytes));
    s.buffers.push_back(p);
    return p;
}

// A raw handle on the raw stream; `workspace` 0: cuBLAS's own.
cublasHandle_t raw_handle(Setup &s, size_t workspace) {
    cublasHandle_t h = nullptr;
    if (s.cb.create(&h) != 0 || s.cb.set_stream(h, reinterpret_cast<cudaStream_t>(s.stream)) != 0)
        bench::die("cublasCreate");
    if (workspace &&
        s.cb.set_workspace(h, reinterpret_cast<void *>(buffer(s, workspace)), workspace) != 0)
        bench::die("cublasSetWorkspace");
    s.handles.push_back(h);
    return h;
}

int sgemm(const Cublas &cb, cublasHandle_t h, const Operands &o) {
    return cb.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, o.n, o.n, o.n, &kOne, o.fa(), o.n, o.fb(), o.n,
                    &kZero, o.fc(), o.n);
}

int gemm_ex(const Cublas &cb, cublasHandle_t h, const Operands &o, cublasComputeType_t compute) {
    return cb.gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, o.n, o.n, o.n, &kOne, o.fa(), CUDA_R_32F, o.n,
                      o.fb(), CUDA_R_32F, o.n, &kZero, o.fc(), CUDA_R_32F, o.n, compute,
                      CUBLAS_GEMM_DEFAULT);
}

// tf_cublas_enqueue of `body(handle, stream)`.
struct Enqueued {
    std::function<int(cublasHandle_t, CUstream)> body;
    static int32_t run(void *handle, void *stream, void *self) {
        return static_cast<Enqueued *>(self)->body(static_cast<cublasHandle_t>(handle),
                                                   static_cast<CUstream>(stream));
    }
};

void add_raw(Setup &s, std::vector<Variant> *vs) {
    const Cublas &cb = s.cb;
    const Operands &o = s.o;
    auto drain = [&s] { return static_cast<int>(s.d.stream_sync(s.stream)); };
    auto add = [&](const char *id, const char *what, std::function<int()> call) {
        vs->push_back(Variant{id, what, std::move(call), drain, "", {}, {}});
    };
    cublasHandle_t lib_like = raw_handle(s, kLibraryWorkspace);
    add("sgemm", "cublasSgemm; handle as the library sets its own (stream once, 32 MiB workspace)",
        [&cb, &o, lib_like] { return sgemm(cb, lib_like, o); });
    add("sgemm_pointer_mode", "the same + cublasSetPointerMode each call (as tf_cublas_enqueue)",
        [&cb, &o, lib_like] {
            int st = cb.set_pointer_mode(lib_like, CUBLAS_POINTER_MODE_HOST);
            return st ? st : sgemm(cb, lib_like, o);
        });
    cublasHandle_t own_ws = raw_handle(s, 0);
    add("sgemm_default_workspace", "cublasSgemm; stream once, cuBLAS's own workspace",
        [&cb, &o, own_ws] { return sgemm(cb, own_ws, o); });
    const bool math = cb.set_math_mode != nullptr;
    cublasHandle_t torch_cached = raw_handle(s, 0);
    CUdeviceptr torch_ws = buffer(s, kLibraryWorkspace);
    CUstream stream = s.stream;
    add("sgemm_torch_cached_workspace",
        "each call cublasSetStream + cublasSetWorkspace (32 MiB) + cublasSetMathMode(DEFAULT), "
        "then cublasSgemm (PyTorch's handle setup, workspace cached per handle and stream)",
        [&cb, &o, torch_cached, torch_ws, stream] {
            int st = cb.set_stream(torch_cached, reinterpret_cast<cudaStream_t>(stream));
            if (!st)
                st = cb.set_workspace(torch_cached, reinterpret_cast<void *>(torch_ws),
                                      kLibraryWorkspace);
            if (!st) st = cb.set_math_mode(torch_cached, CUBLAS_DEFAULT_MATH);
            return st ? st : sgemm(cb, torch_cached, o);
        });
    cublasHandle_t torch_default = raw_handle(s, 0);
    add("sgemm_torch_default_workspace",
        "each call cublasSetStream + cublasSetMathMode(DEFAULT), then cublasSgemm (PyTorch's "
        "handle setup with cuBLAS's own workspace)",
        [&cb, &o, torch_default, stream] {
            int st = cb.set_stream(torch_default, reinterpret_cast<cudaStream_t>(stream));
            if (!st) st = cb.set_math_mode(torch_default, CUBLAS_DEFAULT_MATH);
            return st ? st : sgemm(cb, torch_default, o);
        });
    if (!math) vs->end()[-2].skipped = vs->end()[-1].skipped = "no cublasSetMathMode";
    struct Mode {
        const char *id, *what;
        int math, atomics;
    };
    const Mode modes[] = {
        {"sgemm_math_default", "cublasSgemm, CUBLAS_DEFAULT_MATH set once", CUBLAS_DEFAULT_MATH,
         -1},
        {"sgemm_pedantic", "cublasSgemm, CUBLAS_PEDANTIC_MATH", CUBLAS_PEDANTIC_MATH, -1},
        {"sgemm_tf32", "cublasSgemm, CUBLAS_TF32_TENSOR_OP_MATH (allow_tf32; other numerics)",
         CUBLAS_TF32_TENSOR_OP_MATH, -1},
        {"sgemm_atomics", "cublasSgemm, CUBLAS_ATOMICS_ALLOWED (PyTorch sets it on ROCm only)", -1,
         CUBLAS_ATOMICS_ALLOWED},
    };
    for (const Mode &m : modes) {
        cublasHandle_t h = raw_handle(s, kLibraryWorkspace);
        int st = 0;
        if (m.math >= 0 && cb.set_math_mode)
            st = cb.set_math_mode(h, static_cast<cublasMath_t>(m.math));
        if (m.atomics >= 0 && cb.set_atomics_mode)
            st = cb.set_atomics_mode(h, static_cast<cublasAtomicsMode_t>(m.atomics));
        add(m.id, m.what, [&cb, &o, h] { return sgemm(cb, h, o); });
        if ((m.math >= 0 && !cb.set_math_mode) || (m.atomics >= 0 && !cb.set_atomics_mode))
            vs->back().skipped = "no cublasSetMathMode / cublasSetAtomicsMode";
        else if (st)
            vs->back().skipped = "setting the mode failed: " + std::to_string(st);
    }
    add("gemmex_32f", "cublasGemmEx CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT",
        [&cb, &o, lib_like] { return gemm_ex(cb, lib_like, o, CUBLAS_COMPUTE_32F); });
    add("gemmex_fast_tf32", "cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32 (other numerics)",
        [&cb, &o, lib_like] { return gemm_ex(cb, lib_like, o, CUBLAS_COMPUTE_32F_FAST_TF32); });
    if (!cb.gemm_ex) vs->end()[-2].skipped = vs->end()[-1].skipped = "no cublasGemmEx";
}

void add_lt(Setup &s, std::vector<Variant> *vs) {
    const CublasLt &lt = s.lt;
    const Operands &o = s.o;
    CUstream stream = s.stream;
    auto drain = [&s] { return static_cast<int>(s.d.stream_sync(s.stream)); };
    auto cached = [&](const char *id, const char *what, cublasLtHandle_t h, size_t ws) {
        s.plans.emplace_back(new LtPlan);
        LtPlan *p = s.plans.back().get();
        CUdeviceptr w = buffer(s, ws);
        int st = make_plan(lt, h, o.n, ws, p);
        vs->push_back(Variant{
            id,
            what,
            [&lt, &o, p, h, w, ws, stream] { return lt_matmul(lt, h, *p, o, w, ws, stream); },
            drain,
            st ? "no plan: status " + std::to_string(st) : "",
            {},
            {}});
        if (!st) {
            const std::string key = "plan_" + std::string(id) + "_n" + std::to_string(o.n);
            bench::info((key + "_workspace_need").c_str(), std::to_string(p->result.workspaceSize));
            bench::info((key + "_waves").c_str(), std::to_string(p->result.wavesCount));
        }
    };
    cublasLtHandle_t own = nullptr;
    if (lt.create(&own) != 0) bench::die("cublasLtCreate");
    s.lt_handles.push_back(own);
    cached("lt_cached",
           "cublasLtMatmul, own Lt handle; descriptors, layouts, preference and heuristic made "
           "once; 1 MiB workspace (PyTorch's CUBLASLT_WORKSPACE_SIZE)",
           own, kLtWorkspace);
    cached("lt_cached_32mib", "the same with a 32 MiB workspace", own, kLibraryWorkspace);
    cublasHandle_t blas = raw_handle(s, kLibraryWorkspace);
    cached("lt_on_cublas_handle",
           "cublasLtMatmul on a cuBLAS handle (a cublasHandle_t is a cublasLtHandle_t), cached, "
           "1 MiB",
           reinterpret_cast<cublasLtHandle_t>(blas), kLtWorkspace);
    CUdeviceptr w = buffer(s, kLtWorkspace);
    vs->push_back(Variant{"lt_rebuilt",
                          "cublasLtMatmul with descriptors, layouts, preference and heuristic made "
                          "and destroyed each call (PyTorch's bgemm_internal_cublaslt)",
                          [&lt, &o, own, w, stream] {
                              LtPlan p;
                              int st = make_plan(lt, own, o.n, kLtWorkspace, &p);
                              if (!st) st = lt_matmul(lt, own, p, o, w, kLtWorkspace, stream);
                              destroy_plan(lt, &p);
                              return st;
                          },
                          drain,
                          "",
                          {},
                          {}});
}

void add_library(Setup &s, std::vector<Variant> *vs) {
    const Cublas &cb = s.cb;
    const CublasLt &lt = s.lt;
    const Operands &o = s.o;
    auto through = [&](const char *id, const char *what, tf_runtime *rt,
                       std::function<int(cublasHandle_t, CUstream)> body) {
        auto *e = new Enqueued{std::move(body)};
        std::shared_ptr<Enqueued> keep(e);
        vs->push_back(Variant{id,
                              what,
                              [rt, keep] {
                                  return static_cast<int>(tf_cublas_enqueue(
                                      rt, TF_CUBLAS_POINTER_MODE_HOST, Enqueued::run, keep.get()));
                              },
                              [rt] { return static_cast<int>(tf_runtime_sync(rt)); },
                              "",
                              {},
                              {}});
    };
    through("lib_sgemm", "tf_cublas_enqueue + cublasSgemm (the slot's handle, 32 MiB workspace)",
            s.rt, [&cb, &o](cublasHandle_t h, CUstream) { return sgemm(cb, h, o); });
    through("lib_sgemm_default_workspace",
            "tf_cublas_enqueue + cublasSgemm, runtime with cublas_workspace_bytes = 0", s.rt_ws0,
            [&cb, &o](cublasHandle_t h, CUstream) { return sgemm(cb, h, o); });
    through(
        "lib_gemmex_32f", "tf_cublas_enqueue + cublasGemmEx CUBLAS_COMPUTE_32F", s.rt,
        [&cb, &o](cublasHandle_t h, CUstream) { return gemm_ex(cb, h, o, CUBLAS_COMPUTE_32F); });
    if (!cb.gemm_ex) vs->back().skipped = "no cublasGemmEx";
    if (!lt.usable) return;
    // Plans made at the first call, on the handle the call hands out.
    CUdeviceptr w = buffer(s, kLtWorkspace);
    s.plans.emplace_back(new LtPlan);
    LtPlan *slot_plan = s.plans.back().get();
    through("lib_lt_on_slot_handle",
            "tf_cublas_enqueue + cublasLtMatmul on the slot's cuBLAS handle, cached, 1 MiB "
            "workspace of the caller's",
            s.rt, [&lt, &o, slot_plan, w](cublasHandle_t h, CUstream stream) {
                auto lh = reinterpret_cast<cublasLtHandle_t>(h);
                if (!slot_plan->desc) {
                    int st = make_plan(lt, lh, o.n, kLtWorkspace, slot_plan);
                    if (st) return st;
                }
                return lt_matmul(lt, lh, *slot_plan, o, w, kLtWorkspace, stream);
            });
    cublasLtHandle_t own = s.lt_handles.front();
    s.plans.emplace_back(new LtPlan);
    LtPlan *own_plan = s.plans.back().get();
    int st = make_plan(lt, own, o.n, kLtWorkspace, own_plan);
    through("lib_lt_own_handle",
            "tf_cublas_enqueue + cublasLtMatmul on a separate Lt handle, cached, 1 MiB", s.rt,
            [&lt, &o, own, own_plan, w](cublasHandle_t, CUstream stream) {
                return lt_matmul(lt, own, *own_plan, o, w, kLtWorkspace, stream);
            });
    if (st) vs->back().skipped = "no plan: status " + std::to_string(st);
}

// ---- checking and timing ---------------------------------------------------------

Operands make_operands(Setup &s, int n) {
    Operands o{n, 0, 0, 0, {}};
    const size_t elems = size_t(n) * n, bytes = elems * sizeof(float);
    std::vector<float> a(elems), b(elems);
    for (size_t i = 0; i < elems; ++i) {
        a[i] = static_cast<float>((i * 7 + 3) % 5);
        b[i] = static_cast<float>((i * 11 + 1) % 4);
    }
    o.want.assign(elems, 0.0f);
    for (int j = 0; j < n; ++j)
        for (int p = 0; p < n; ++p)
            for (int i = 0; i < n; ++i)
                o.want[i + j * size_t(n)] += a[i + p * size_t(n)] * b[p + j * size_t(n)];
    o.a = buffer(s, bytes);
    o.b = buffer(s, bytes);
    o.c = buffer(s, bytes);
    BENCH_CK(s.mem.htod(o.a, a.data(), bytes));
    BENCH_CK(s.mem.htod(o.b, b.data(), bytes));
    return o;
}

// One call on a zeroed C, compared with the host's product.
void check(Setup &s, Variant &v) {
    if (!v.skipped.empty()) return;
    const size_t bytes = size_t(s.o.n) * s.o.n * sizeof(float);
    std::vector<float> got(bytes / sizeof(float), -1.0f);
    BENCH_CK(s.d.memset_async(s.o.c, 0, bytes, s.stream));
    BENCH_CK(s.d.stream_sync(s.stream));
    int st = v.call();
    if (!st) st = v.drain();
    if (st) {
        v.skipped = "failed: status " + std::to_string(st);
        return;
    }
    BENCH_CK(s.mem.dtoh(got.data(), s.o.c, bytes));
    if (std::memcmp(got.data(), s.o.want.data(), bytes) != 0) v.skipped = "wrong product";
}

// `reps` rounds; in each, every variant runs `iters` calls and is drained.
void measure(std::vector<Variant> &vs, int iters, int reps, bool sustained) {
    for (int r = 0; r < reps; ++r)
        for (size_t i = 0; i < vs.size(); ++i) {
            Variant &v = vs[(i + r) % vs.size()];
            if (!v.skipped.empty()) continue;
            auto t0 = bench::clk::now();
            int st = 0;
            for (int k = 0; k < iters && !st; ++k) st = v.call();
            const double ns = bench::ns_since(t0) / iters;
            if (!st) st = v.drain();
            if (st) v.skipped = "failed while timed: status " + std::to_string(st);
            (sustained ? v.sustained : v.burst).push_back(ns);
        }
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Returns how many variants were skipped.
int run_size(Setup &s, int n, bool smoke) {
    s.o = make_operands(s, n);
    std::vector<Variant> vs;
    add_raw(s, &vs);
    if (s.lt.usable) add_lt(s, &vs);
    add_library(s, &vs);
    for (Variant &v : vs) check(s, v);
    for (Variant &v : vs)  // warm-up: heuristics, first launches, the slot's handle
        for (int k = 0; k < (smoke ? 2 : 100) && v.skipped.empty(); ++k) v.call();
    for (Variant &v : vs)
        if (v.skipped.empty()) v.drain();
    measure(vs, smoke ? 4 : 2000, smoke ? 2 : 15, true);
    measure(vs, smoke ? 4 : 200, smoke ? 2 : 41, false);
    int skipped = 0;
    for (Variant &v : vs) {
        if (!v.skipped.empty()) {
            bench::info(("skipped_n" + std::to_string(n) + "_" + v.id).c_str(), v.skipped);
            ++skipped;
        }
        const bool ran = v.skipped.empty();
        std::printf("EXPLORE|%d|%s|%.1f|%.1f|%s\n", n, v.id.c_str(),
                    ran ? median(v.sustained) : 0.0, ran ? median(v.burst) : 0.0, v.what.c_str());
    }
    std::fflush(stdout);
    for (cublasHandle_t h : s.handles) s.cb.destroy(h);
    for (auto &p : s.plans) destroy_plan(s.lt, p.get());
    s.handles.clear();
    s.plans.clear();
    BENCH_CK(s.d.stream_sync(s.stream));
    bench::ok(tf_runtime_sync(s.rt), "tf_runtime_sync");
    bench::ok(tf_runtime_sync(s.rt_ws0), "tf_runtime_sync");
    for (CUdeviceptr p : s.buffers) BENCH_CK(s.mem.free(p));
    s.buffers.clear();
    return skipped;
}

void print_libraries(const Setup &s) {
    int v[3] = {0, 0, 0};
    const libraryPropertyType parts[] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
    for (int i = 0; i < 3; ++i) s.cb.get_property(parts[i], &v[i]);
    bench::info("cublas", path_of(s.cb.lib) + " " + std::to_string(v[0]) + "." +
                              std::to_string(v[1]) + "." + std::to_string(v[2]));
    void *theirs = nullptr;
    bool shared = tf_cublas_symbol("cublasSgemm_v2", &theirs) == TF_OK &&
                  theirs == reinterpret_cast<void *>(s.cb.sgemm);
    bench::info("cublas_is_the_librarys", shared ? "yes" : "NO");
    if (!s.lt.usable) {
        bench::info("cublaslt", "none beside cuBLAS: the lt rows are skipped");
        return;
    }
    bench::info("cublaslt", path_of(s.lt.lib) + " " + std::to_string(s.lt.version()));
    shared = tf_cublas_symbol("cublasLtMatmul", &theirs) == TF_OK &&
             theirs == reinterpret_cast<void *>(s.lt.matmul);
    bench::info("cublaslt_is_the_librarys_cublas_dependency", shared ? "yes" : "no");
}

}  // namespace

int main(int argc, char **argv) {
    const bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
    Setup s{};
    s.d = bench::load_raw_driver();
    bench::driver_entry("cuMemcpyHtoD", 3020, &s.mem.htod);
    bench::driver_entry("cuMemcpyDtoH", 3020, &s.mem.dtoh);
    bench::driver_entry("cuMemFree", 3020, &s.mem.free);
    s.cb = load_cublas();
    s.lt = load_cublaslt(s.cb);
    if (tf_runtime_new(0, &s.rt) != TF_OK) bench::die("tf_runtime_new");
    tf_runtime_options opts;
    tf_runtime_options_init(&opts, sizeof opts);
    opts.cublas_workspace_bytes = 0;
    if (tf_runtime_new_with_options(0, &opts, &s.rt_ws0) != TF_OK)
        bench::die("tf_runtime_new_with_options");
    void *primary = nullptr;
    bench::ok(tf_runtime_primary_context(s.rt, &primary), "tf_runtime_primary_context");
    BENCH_CK(s.d.set_current(static_cast<CUcontext>(primary)));
    BENCH_CK(s.d.stream_create(&s.stream, CU_STREAM_NON_BLOCKING));
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    bench::ok(tf_runtime_device_info(s.rt, &p), "tf_runtime_device_info");
    bench::info("device", p.name);
    print_libraries(s);
    const std::vector<int> sizes = smoke ? std::vector<int>{8} : std::vector<int>{64, 128, 256};
    int skipped = 0;
    for (int n : sizes) skipped += run_size(s, n, smoke);
    for (cublasLtHandle_t h : s.lt_handles) s.lt.destroy(h);
    BENCH_CK(s.d.set_current(nullptr));
    tf_runtime_release(s.rt_ws0);
    tf_runtime_release(s.rt);
    // Against the doubles every variant must run and compute the right product.
    if (smoke && skipped) {
        std::fprintf(stderr, "bench: %d variants skipped in the smoke run\n", skipped);
        return 1;
    }
    return 0;
}
