// SPDX-License-Identifier: MIT OR Apache-2.0
// cuBLASLt double (libcublasLt.so.13), for what bench/explore_gemm calls:
// handles, status names, matmul descriptors, matrix layouts, preferences,
// the heuristic and cublasLtMatmul, on float and double column-major
// matrices, and what tf_cublaslt_enqueue makes and destroys.
//
// As in cuBLAS, a cuBLAS handle is a cuBLASLt handle: cublasLtCreate makes
// a cuBLAS handle record of the driver double (tfd_cublas_register), and
// every call taking a cublasLtHandle_t accepts either.  cublasLtMatmul is
// checked at the call as the cuBLAS double's GEMMs are (the handle's context
// current, the stream usable, the operands and a nonzero workspace in device
// memory) and queued on its stream; it runs, naively, when the stream runs
// it.  What the double does not model is refused with
// CUBLAS_STATUS_NOT_SUPPORTED rather than computed wrongly: other types,
// row-major or batched layouts, epilogues, device-mode scalars.  The
// heuristic answers one algorithm that needs no workspace.
#include <cublasLt.h>
#include <cuda.h>

#include <cstring>
#include <set>
#include <vector>

#include "companion.h"
#include "cublas_status.h"

namespace tfd {
namespace {

constexpr size_t kVersion = 130100;

template <class Body>
cublasStatus_t run(const char *entry, Body body)
{
    return run_companion(entry, CUBLAS_STATUS_ALLOC_FAILED, CUBLAS_STATUS_INTERNAL_ERROR, body);
}

struct Desc {
    int compute, scale;
    int transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
};
struct Layout {
    int type;
    uint64_t rows, cols;
    int64_t ld;
};
struct Pref {
    uint64_t max_workspace = 0;
};

// The live descriptors of each kind, under the driver double's mutex.
template <class T>
std::set<T *> &live()
{
    static auto *s = new std::set<T *>;
    return *s;
}

template <class T>
T *find(void *p)
{
    auto &s = live<T>();
    auto it = s.find(static_cast<T *>(p));
    return it == s.end() ? nullptr : *it;
}

template <class T, class Out>
cublasStatus_t create(Out *out, const T &value)
{
    if (out == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    T *p = new T(value);
    live<T>().insert(p);
    *out = reinterpret_cast<Out>(p);
    return CUBLAS_STATUS_SUCCESS;
}

template <class T>
cublasStatus_t destroy(void *p)
{
    T *d = find<T>(p);
    if (d == nullptr)
        return p == nullptr ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    live<T>().erase(d);
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}

// An attribute's value of exactly `size` bytes.
template <class V>
bool value_of(const void *buf, size_t size, V *out)
{
    if (buf == nullptr || size != sizeof(V))
        return false;
    std::memcpy(out, buf, sizeof(V));
    return true;
}

size_t element_size(int type)
{
    return type == CUDA_R_32F ? 4 : type == CUDA_R_64F ? 8 : 0;
}

bool compute_ok(int compute, int type)
{
    if (type == CUDA_R_32F)
        return compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
               compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    return type == CUDA_R_64F &&
           (compute == CUBLAS_COMPUTE_64F || compute == CUBLAS_COMPUTE_64F_PEDANTIC);
}

bool op_ok(int op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T;
}

// The problem a descriptor and four layouts describe, or false.
struct Problem {
    int type, ta, tb;
    uint64_t m, n, k;
    int64_t lda, ldb, ldc, ldd;
};

cublasStatus_t problem_of(void *desc, void *a, void *b, void *c, void *d, Problem *p)
{
    const Desc *op = find<Desc>(desc);
    const Layout *la = find<Layout>(a), *lb = find<Layout>(b), *lc = find<Layout>(c),
                 *ld = find<Layout>(d);
    if (op == nullptr || la == nullptr || lb == nullptr || lc == nullptr || ld == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    const int type = la->type;
    if (lb->type != type || lc->type != type || ld->type != type || op->scale != type ||
        !compute_ok(op->compute, type) || !op_ok(op->transa) || !op_ok(op->transb))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const bool na = op->transa == CUBLAS_OP_N, nb = op->transb == CUBLAS_OP_N;
    p->type = type;
    p->ta = op->transa;
    p->tb = op->transb;
    p->m = lc->rows;
    p->n = lc->cols;
    p->k = na ? la->cols : la->rows;
    if ((na ? la->rows : la->cols) != p->m || (nb ? lb->rows : lb->cols) != p->k ||
        (nb ? lb->cols : lb->rows) != p->n || ld->rows != p->m || ld->cols != p->n)
        return CUBLAS_STATUS_INVALID_VALUE;
    p->lda = la->ld;
    p->ldb = lb->ld;
    p->ldc = lc->ld;
    p->ldd = ld->ld;
    return CUBLAS_STATUS_SUCCESS;
}

size_t span(uint64_t rows, uint64_t cols, int64_t ld, size_t elem)
{
    return rows == 0 || cols == 0 ? 0 : (size_t(cols - 1) * size_t(ld) + size_t(rows)) * elem;
}

struct Job {
    Problem p;
    double alpha, beta;
    uint64_t a, b, c, d;
};

template <class T>
T at(const unsigned char *base, size_t i)
{
    T v;
    std::memcpy(&v, base + i * sizeof(T), sizeof(T));
    return v;
}

// The host views of a job's operands; false when one is not device memory
// (A and B are not read when k is 0).
struct Views {
    unsigned char *a, *b, *c, *d;
};

bool views(const Job &j, Views *v)
{
    const Problem &p = j.p;
    const size_t e = element_size(p.type);
    const bool na = p.ta == CUBLAS_OP_N, nb = p.tb == CUBLAS_OP_N;
    v->a = static_cast<unsigned char *>(
        tfd_translate(j.a, span(na ? p.m : p.k, na ? p.k : p.m, p.lda, e)));
    v->b = static_cast<unsigned char *>(
        tfd_translate(j.b, span(nb ? p.k : p.n, nb ? p.n : p.k, p.ldb, e)));
    v->c = static_cast<unsigned char *>(tfd_translate(j.c, span(p.m, p.n, p.ldc, e)));
    v->d = static_cast<unsigned char *>(tfd_translate(j.d, span(p.m, p.n, p.ldd, e)));
    return !(p.k > 0 && (v->a == nullptr || v->b == nullptr)) && v->c != nullptr && v->d != nullptr;
}

// D = alpha op(A) op(B) + beta C on the host views, looked up again when it
// runs: memory gone by then faults the context.
template <class T>
int compute(const Job &j)
{
    const Problem &p = j.p;
    const size_t e = sizeof(T);
    const bool na = p.ta == CUBLAS_OP_N, nb = p.tb == CUBLAS_OP_N;
    Views v;
    if (!views(j, &v))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    const unsigned char *a = v.a, *b = v.b, *c = v.c;
    unsigned char *d = v.d;
    std::vector<T> out(size_t(p.m) * size_t(p.n));
    for (uint64_t col = 0; col < p.n; ++col)
        for (uint64_t row = 0; row < p.m; ++row) {
            T sum = T(0);
            for (uint64_t q = 0; q < p.k; ++q)
                sum += at<T>(a, na ? row + q * p.lda : q + row * p.lda) *
                       at<T>(b, nb ? q + col * p.ldb : col + q * p.ldb);
            const T old = j.beta == 0 ? T(0) : T(j.beta) * at<T>(c, row + col * p.ldc);
            out[row + col * p.m] = T(j.alpha) * sum + old;
        }
    for (uint64_t col = 0; col < p.n; ++col)
        for (uint64_t row = 0; row < p.m; ++row)
            std::memcpy(d + (row + col * p.ldd) * e, &out[row + col * p.m], e);
    return 0;
}

int run_job(void *arg)
{
    const Job &j = *static_cast<const Job *>(arg);
    return j.p.type == CUDA_R_32F ? compute<float>(j) : compute<double>(j);
}

void drop_job(void *arg)
{
    delete static_cast<Job *>(arg);
}

double scalar(int type, const void *p)
{
    if (type == CUDA_R_32F) {
        float f;
        std::memcpy(&f, p, sizeof f);
        return f;
    }
    double v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

uint64_t addr(const void *p)
{
    return reinterpret_cast<uintptr_t>(p);
}

}  // namespace
}  // namespace tfd

using namespace tfd;

extern "C" {

size_t cublasLtGetVersion(void)
{
    return kVersion;
}

const char *cublasLtGetStatusName(cublasStatus_t status)
{
    if (tfd_enter("cublasLtGetStatusName") != 0)
        return nullptr;
    const StatusText *t = find_cublas_status(raw_enum(status));
    return t == nullptr ? "<unknown>" : t->name;
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    if (tfd_enter("cublasLtGetStatusString") != 0)
        return nullptr;
    const StatusText *t = find_cublas_status(raw_enum(status));
    return t == nullptr ? "unknown error" : t->text;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle)
{
    return run("cublasLtCreate", [&] {
        if (handle == nullptr)
            return CUBLAS_STATUS_INVALID_VALUE;
        void *h = tfd_cublas_register();
        if (h == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        *handle = static_cast<cublasLtHandle_t>(h);
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle)
{
    return run("cublasLtDestroy", [&] {
        return tfd_cublas_unregister(handle) == 0 ? CUBLAS_STATUS_SUCCESS
                                                  : CUBLAS_STATUS_NOT_INITIALIZED;
    });
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    return run("cublasLtMatmulDescCreate", [&] {
        Desc d;
        d.compute = raw_enum(compute);
        d.scale = raw_enum(scale);
        return create(desc, d);
    });
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc)
{
    return run("cublasLtMatmulDescDestroy", [&] { return destroy<Desc>(desc); });
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t size)
{
    return run("cublasLtMatmulDescSetAttribute", [&] {
        Desc *d = find<Desc>(desc);
        int32_t v = 0;
        if (d == nullptr || !value_of(buf, size, &v))
            return CUBLAS_STATUS_INVALID_VALUE;
        switch (raw_enum(attr)) {
            case CUBLASLT_MATMUL_DESC_TRANSA: d->transa = v; return CUBLAS_STATUS_SUCCESS;
            case CUBLASLT_MATMUL_DESC_TRANSB: d->transb = v; return CUBLAS_STATUS_SUCCESS;
            case CUBLASLT_MATMUL_DESC_POINTER_MODE:
                return v == CUBLASLT_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS
                                                       : CUBLAS_STATUS_NOT_SUPPORTED;
            case CUBLASLT_MATMUL_DESC_EPILOGUE:
                return v == CUBLASLT_EPILOGUE_DEFAULT ? CUBLAS_STATUS_SUCCESS
                                                      : CUBLAS_STATUS_NOT_SUPPORTED;
            default: return CUBLAS_STATUS_NOT_SUPPORTED;
        }
    });
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    return run("cublasLtMatrixLayoutCreate", [&] {
        const int t = raw_enum(type);
        if (element_size(t) == 0)
            return CUBLAS_STATUS_NOT_SUPPORTED;
        if (ld < 1 || uint64_t(ld) < rows || rows > INT32_MAX || cols > INT32_MAX)
            return CUBLAS_STATUS_INVALID_VALUE;
        return create(layout, Layout{t, rows, cols, ld});
    });
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout)
{
    return run("cublasLtMatrixLayoutDestroy", [&] { return destroy<Layout>(layout); });
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    return run("cublasLtMatmulPreferenceCreate", [&] { return create(pref, Pref{}); });
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    return run("cublasLtMatmulPreferenceDestroy", [&] { return destroy<Pref>(pref); });
}

// The workspace limit is kept; the alignments and search modes ask nothing
// of an algorithm that needs no workspace.
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size)
{
    return run("cublasLtMatmulPreferenceSetAttribute", [&] {
        Pref *p = find<Pref>(pref);
        if (p == nullptr || buf == nullptr || size == 0)
            return CUBLAS_STATUS_INVALID_VALUE;
        if (raw_enum(attr) == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES &&
            !value_of(buf, size, &p->max_workspace))
            return CUBLAS_STATUS_INVALID_VALUE;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int *returned)
{
    return run("cublasLtMatmulAlgoGetHeuristic", [&] {
        if (tfd_cublas_lookup(handle) == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        if (requested <= 0 || results == nullptr || returned == nullptr ||
            find<Pref>(pref) == nullptr)
            return CUBLAS_STATUS_INVALID_VALUE;
        Problem p;
        cublasStatus_t st = problem_of(desc, a, b, c, d, &p);
        if (st != CUBLAS_STATUS_SUCCESS)
            return st;
        std::memset(&results[0], 0, sizeof results[0]);
        results[0].algo.data[0] = 1;  // the one naive algorithm
        results[0].workspaceSize = 0;
        results[0].state = CUBLAS_STATUS_SUCCESS;
        results[0].wavesCount = 1.0f;
        *returned = 1;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t a, const void *B,
                              cublasLtMatrixLayout_t b, const void *beta, const void *C,
                              cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream)
{
    return run("cublasLtMatmul", [&] {
        tfd_cublas_info *h = tfd_cublas_lookup(handle);
        if (h == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        Problem p;
        cublasStatus_t st = problem_of(desc, a, b, c, d, &p);
        if (st != CUBLAS_STATUS_SUCCESS)
            return st;
        if (alpha == nullptr || beta == nullptr || (algo != nullptr && algo->data[0] != 1))
            return CUBLAS_STATUS_INVALID_VALUE;
        if (workspace_bytes > 0 && tfd_translate(addr(workspace), workspace_bytes) == nullptr)
            return CUBLAS_STATUS_INVALID_VALUE;
        if (tfd_current_context() != h->context || tfd_stream_status(stream) != 0)
            return CUBLAS_STATUS_EXECUTION_FAILED;
        if (p.m == 0 || p.n == 0)
            return CUBLAS_STATUS_SUCCESS;
        auto *job = new Job{
            p, scalar(p.type, alpha), scalar(p.type, beta), addr(A), addr(B), addr(C), addr(D)};
        Views v;
        if (!views(*job, &v)) {
            delete job;
            return CUBLAS_STATUS_EXECUTION_FAILED;
        }
        if (tfd_enqueue(stream, "cublasLtMatmul", run_job, job, drop_job, nullptr) != 0) {
            delete job;
            return CUBLAS_STATUS_EXECUTION_FAILED;
        }
        ++h->gemms;
        h->last_stream = stream;
        return CUBLAS_STATUS_SUCCESS;
    });
}

}  // extern "C"
