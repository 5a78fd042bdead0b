// SPDX-License-Identifier: MIT OR Apache-2.0
// cuBLAS double (libcublas.so.13, and libcublas.so.12 from the same source).
// Handles live in the driver double (tfd_cublas_register) so tests can see
// them through libcuda.so.1.  A GEMM is checked at the call (it needs the
// handle's context current, its stream usable there, and its operands in
// device memory), then queued on the handle's stream (tfd_enqueue): it runs,
// naively, on the host view of device memory when the stream runs it.
// Host-mode alpha and beta are read at the call, device-mode ones when the
// GEMM runs, as in cuBLAS.
//
// As in real cuBLAS, cublasSetStream resets the handle's workspace to the
// default (NULL, 0): a library must set its workspace again after changing
// the stream.
//
// cublasGemmEx on float (CUBLAS_COMPUTE_32F, _PEDANTIC, _FAST_TF32) and
// double (CUBLAS_COMPUTE_64F, _PEDANTIC) operands runs as cublasSgemm or
// cublasDgemm (TF32 rounding is not modelled); other types are
// CUBLAS_STATUS_NOT_SUPPORTED.  Math and atomics modes are checked and kept
// per handle; they change nothing the double computes.
#include <cublas_api.h>
#include <cuda.h>

#include <cstring>
#include <map>
#include <vector>

#include "companion.h"
#include "cublas_status.h"

#ifndef TFD_CUBLAS_VERSION
#error "TFD_CUBLAS_VERSION (e.g. 130100) must be defined"
#endif

namespace tfd {
namespace {

constexpr int kMajor = TFD_CUBLAS_VERSION / 10000;
constexpr int kMinor = TFD_CUBLAS_VERSION / 100 % 100;
constexpr int kPatch = TFD_CUBLAS_VERSION % 100;
constexpr uintptr_t kWorkspaceAlign = 256;

template <class Body>
cublasStatus_t run(const char *entry, Body body)
{
    return run_companion(entry, CUBLAS_STATUS_ALLOC_FAILED, CUBLAS_STATUS_INTERNAL_ERROR, body);
}

tfd_cublas_info *find(cublasHandle_t h)
{
    return tfd_cublas_lookup(h);
}

uint64_t dev_addr(const void *p)
{
    return reinterpret_cast<uintptr_t>(p);
}

// ---- GEMM ------------------------------------------------------------------

struct Gemm {
    int ta, tb;  // cublasOperation_t values, read with raw_enum
    int m, n, k, lda, ldb, ldc;
};

bool op_ok(int op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

int at_least_one(int v)
{
    return v < 1 ? 1 : v;
}

bool shape_ok(const Gemm &g)
{
    if (!op_ok(g.ta) || !op_ok(g.tb) || g.m < 0 || g.n < 0 || g.k < 0)
        return false;
    int rows_a = g.ta == CUBLAS_OP_N ? g.m : g.k;
    int rows_b = g.tb == CUBLAS_OP_N ? g.k : g.n;
    return g.lda >= at_least_one(rows_a) && g.ldb >= at_least_one(rows_b) &&
           g.ldc >= at_least_one(g.m);
}

// Bytes spanned by a column-major rows x cols matrix with leading dim ld.
size_t span(int rows, int cols, int ld, size_t elem)
{
    if (rows == 0 || cols == 0)
        return 0;
    return (size_t(cols - 1) * size_t(ld) + size_t(rows)) * elem;
}

// Host view of a device operand, or nullptr when outside an allocation.
unsigned char *operand(const void *p, size_t bytes)
{
    if (bytes == 0)
        return nullptr;
    return static_cast<unsigned char *>(tfd_translate(dev_addr(p), bytes));
}

template <class T>
T load(const unsigned char *base, size_t index)
{
    T v;
    std::memcpy(&v, base + index * sizeof(T), sizeof(T));
    return v;
}

template <class T>
void store(unsigned char *base, size_t index, T v)
{
    std::memcpy(base + index * sizeof(T), &v, sizeof(T));
}

// Read alpha or beta per the handle's pointer mode.
template <class T>
bool scalar(const tfd_cublas_info &h, const T *p, T *out)
{
    if (h.pointer_mode == CUBLAS_POINTER_MODE_HOST) {
        std::memcpy(out, p, sizeof(T));
        return true;
    }
    const void *host = tfd_translate(dev_addr(p), sizeof(T));
    if (host == nullptr)
        return false;
    std::memcpy(out, host, sizeof(T));
    return true;
}

// C = alpha * op(A) * op(B) + beta * C on host views.  A and B may be null
// when they are not read (k == 0 or alpha == 0); C is not read when beta == 0.
template <class T>
void compute(const Gemm &g, T alpha, const unsigned char *a, const unsigned char *b, T beta,
             unsigned char *c)
{
    std::vector<T> out(size_t(g.m) * size_t(g.n));
    bool product = g.k > 0 && alpha != T(0);
    for (int j = 0; j < g.n; ++j) {
        for (int i = 0; i < g.m; ++i) {
            T sum = T(0);
            for (int p = 0; product && p < g.k; ++p) {
                size_t ai = g.ta == CUBLAS_OP_N ? size_t(i) + size_t(p) * g.lda
                                                : size_t(p) + size_t(i) * g.lda;
                size_t bi = g.tb == CUBLAS_OP_N ? size_t(p) + size_t(j) * g.ldb
                                                : size_t(j) + size_t(p) * g.ldb;
                sum += load<T>(a, ai) * load<T>(b, bi);
            }
            size_t ci = size_t(i) + size_t(j) * g.ldc;
            T old = beta == T(0) ? T(0) : beta * load<T>(c, ci);
            out[size_t(i) + size_t(j) * g.m] = (product ? alpha * sum : T(0)) + old;
        }
    }
    for (int j = 0; j < g.n; ++j)
        for (int i = 0; i < g.m; ++i)
            store<T>(c, size_t(i) + size_t(j) * g.ldc, out[size_t(i) + size_t(j) * g.m]);
}

// The handle's context must be current and usable, and its stream usable.
bool can_launch(const tfd_cublas_info &h)
{
    return tfd_current_context() == h.context && tfd_stream_status(h.stream) == 0;
}

// A queued GEMM: everything it needs when its stream runs it.
template <class T>
struct GemmJob {
    Gemm g;
    bool device_scalars;
    T alpha, beta;              // host pointer mode: read at the call
    const T *alpha_p, *beta_p;  // device pointer mode: read when it runs
    const T *A, *B;
    T *C;
};

// The operands' host views for `alpha`; false when one is not device memory.
template <class T>
bool views(const Gemm &g, T alpha, const T *A, const T *B, T *C, const unsigned char **a,
           const unsigned char **b, unsigned char **c)
{
    *a = *b = nullptr;
    if (g.k > 0 && alpha != T(0)) {
        bool na = g.ta == CUBLAS_OP_N, nb = g.tb == CUBLAS_OP_N;
        *a = operand(A, span(na ? g.m : g.k, na ? g.k : g.m, g.lda, sizeof(T)));
        *b = operand(B, span(nb ? g.k : g.n, nb ? g.n : g.k, g.ldb, sizeof(T)));
        if (*a == nullptr || *b == nullptr)
            return false;
    }
    *c = operand(C, span(g.m, g.n, g.ldc, sizeof(T)));
    return *c != nullptr;
}

// Runs when the stream gets to it; memory gone by then faults the context.
template <class T>
int run_gemm(void *p)
{
    const GemmJob<T> &j = *static_cast<const GemmJob<T> *>(p);
    T alpha = j.alpha, beta = j.beta;
    tfd_cublas_info device_mode = {};
    device_mode.pointer_mode = CUBLAS_POINTER_MODE_DEVICE;
    if (j.device_scalars &&
        (!scalar(device_mode, j.alpha_p, &alpha) || !scalar(device_mode, j.beta_p, &beta)))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    const unsigned char *a = nullptr, *b = nullptr;
    unsigned char *c = nullptr;
    if (!views(j.g, alpha, j.A, j.B, j.C, &a, &b, &c))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    compute<T>(j.g, alpha, a, b, beta, c);
    return 0;
}

template <class T>
void drop_gemm(void *p)
{
    delete static_cast<GemmJob<T> *>(p);
}

template <class T>
cublasStatus_t gemm(cublasHandle_t handle, const Gemm &g, const T *alpha_p, const T *A, const T *B,
                    const T *beta_p, T *C)
{
    tfd_cublas_info *h = find(handle);
    if (h == nullptr)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!shape_ok(g) || alpha_p == nullptr || beta_p == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (g.m == 0 || g.n == 0)
        return CUBLAS_STATUS_SUCCESS;  // quick return: nothing launched
    if (!can_launch(*h))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    T alpha, beta;
    if (!scalar(*h, alpha_p, &alpha) || !scalar(*h, beta_p, &beta))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    const unsigned char *a = nullptr, *b = nullptr;
    unsigned char *c = nullptr;
    if (!views(g, alpha, A, B, C, &a, &b, &c))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    bool device_scalars = h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
    auto *job = new GemmJob<T>{g, device_scalars, alpha, beta, alpha_p, beta_p, A, B, C};
    if (tfd_enqueue(h->stream, "cublasGemm", run_gemm<T>, job, drop_gemm<T>, nullptr) != 0) {
        delete job;
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    h->last_stream = h->stream;
    ++h->gemms;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- math and atomics modes -------------------------------------------------------

struct Modes {
    int math = CUBLAS_DEFAULT_MATH;
    int atomics = CUBLAS_ATOMICS_NOT_ALLOWED;
};

// Per live handle, under the driver double's mutex; forgotten at cublasDestroy.
std::map<cublasHandle_t, Modes> &modes()
{
    static auto *m = new std::map<cublasHandle_t, Modes>;
    return *m;
}

bool math_ok(int mode)
{
    const int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    return base == CUBLAS_DEFAULT_MATH || base == CUBLAS_TENSOR_OP_MATH ||
           base == CUBLAS_PEDANTIC_MATH || base == CUBLAS_TF32_TENSOR_OP_MATH;
}

}  // namespace
}  // namespace tfd

using namespace tfd;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    return run("cublasCreate_v2", [&] {
        if (handle == nullptr)
            return CUBLAS_STATUS_INVALID_VALUE;
        void *h = tfd_cublas_register();
        if (h == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        *handle = static_cast<cublasHandle_t>(h);
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    return run("cublasDestroy_v2", [&] {
        modes().erase(handle);
        return tfd_cublas_unregister(handle) == 0 ? CUBLAS_STATUS_SUCCESS
                                                  : CUBLAS_STATUS_NOT_INITIALIZED;
    });
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    return run("cublasSetStream_v2", [&] {
        tfd_cublas_info *h = find(handle);
        if (h == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        h->stream = stream;
        h->workspace = nullptr;
        h->workspace_size = 0;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *stream)
{
    return run("cublasGetStream_v2", [&] {
        tfd_cublas_info *h = find(handle);
        if (h == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        if (stream == nullptr)
            return CUBLAS_STATUS_INVALID_VALUE;
        *stream = static_cast<cudaStream_t>(h->stream);
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
    return run("cublasSetPointerMode_v2", [&] {
        tfd_cublas_info *h = find(handle);
        if (h == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        int m = raw_enum(mode);
        if (m != CUBLAS_POINTER_MODE_HOST && m != CUBLAS_POINTER_MODE_DEVICE)
            return CUBLAS_STATUS_INVALID_VALUE;
        h->pointer_mode = m;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode)
{
    return run("cublasGetPointerMode_v2", [&] {
        tfd_cublas_info *h = find(handle);
        if (h == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        if (mode == nullptr)
            return CUBLAS_STATUS_INVALID_VALUE;
        *mode = static_cast<cublasPointerMode_t>(h->pointer_mode);
        return CUBLAS_STATUS_SUCCESS;
    });
}

// The workspace must be 256-byte aligned device memory (NULL with size 0
// restores the default).
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes)
{
    return run("cublasSetWorkspace_v2", [&] {
        tfd_cublas_info *h = find(handle);
        if (h == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        bool none = workspace == nullptr && bytes == 0;
        if (!none && (reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlign != 0 ||
                      tfd_translate(dev_addr(workspace), bytes) == nullptr))
            return CUBLAS_STATUS_INVALID_VALUE;
        h->workspace = workspace;
        h->workspace_size = bytes;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t, int *version)
{
    return run("cublasGetVersion_v2", [&] {
        if (version == nullptr)
            return CUBLAS_STATUS_INVALID_VALUE;
        *version = TFD_CUBLAS_VERSION;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    return run("cublasGetProperty", [&] {
        if (value == nullptr)
            return CUBLAS_STATUS_INVALID_VALUE;
        switch (raw_enum(type)) {
            case MAJOR_VERSION: *value = kMajor; return CUBLAS_STATUS_SUCCESS;
            case MINOR_VERSION: *value = kMinor; return CUBLAS_STATUS_SUCCESS;
            case PATCH_LEVEL: *value = kPatch; return CUBLAS_STATUS_SUCCESS;
            default: return CUBLAS_STATUS_INVALID_VALUE;
        }
    });
}

// The name and text functions cannot report a failure: an injected one makes
// them answer NULL, as a cuBLAS that cannot name a status might.
const char *cublasGetStatusName(cublasStatus_t status)
{
    if (tfd_enter("cublasGetStatusName") != 0)
        return nullptr;
    const StatusText *t = find_cublas_status(raw_enum(status));
    return t == nullptr ? "<unknown>" : t->name;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    if (tfd_enter("cublasGetStatusString") != 0)
        return nullptr;
    const StatusText *t = find_cublas_status(raw_enum(status));
    return t == nullptr ? "unknown error" : t->text;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    Gemm g = {raw_enum(transa), raw_enum(transb), m, n, k, lda, ldb, ldc};
    return run("cublasSgemm_v2", [&] { return gemm<float>(handle, g, alpha, A, B, beta, C); });
}

cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const double *alpha,
                              const double *A, int lda, const double *B, int ldb,
                              const double *beta, double *C, int ldc)
{
    Gemm g = {raw_enum(transa), raw_enum(transb), m, n, k, lda, ldb, ldc};
    return run("cublasDgemm_v2", [&] { return gemm<double>(handle, g, alpha, A, B, beta, C); });
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t)
{
    Gemm g = {raw_enum(transa), raw_enum(transb), m, n, k, lda, ldb, ldc};
    const int type = raw_enum(Atype), compute = raw_enum(computeType);
    const bool same = raw_enum(Btype) == type && raw_enum(Ctype) == type;
    return run("cublasGemmEx", [&] {
        if (same && type == CUDA_R_32F &&
            (compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
             compute == CUBLAS_COMPUTE_32F_FAST_TF32))
            return gemm<float>(handle, g, static_cast<const float *>(alpha),
                               static_cast<const float *>(A), static_cast<const float *>(B),
                               static_cast<const float *>(beta), static_cast<float *>(C));
        if (same && type == CUDA_R_64F &&
            (compute == CUBLAS_COMPUTE_64F || compute == CUBLAS_COMPUTE_64F_PEDANTIC))
            return gemm<double>(handle, g, static_cast<const double *>(alpha),
                                static_cast<const double *>(A), static_cast<const double *>(B),
                                static_cast<const double *>(beta), static_cast<double *>(C));
        return find(handle) == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED
                                       : CUBLAS_STATUS_NOT_SUPPORTED;
    });
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    return run("cublasSetMathMode", [&] {
        if (find(handle) == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        if (!math_ok(raw_enum(mode)))
            return CUBLAS_STATUS_INVALID_VALUE;
        modes()[handle].math = raw_enum(mode);
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    return run("cublasGetMathMode", [&] {
        if (find(handle) == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        if (mode == nullptr)
            return CUBLAS_STATUS_INVALID_VALUE;
        *mode = static_cast<cublasMath_t>(modes()[handle].math);
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode)
{
    return run("cublasSetAtomicsMode", [&] {
        if (find(handle) == nullptr)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        const int m = raw_enum(mode);
        if (m != CUBLAS_ATOMICS_NOT_ALLOWED && m != CUBLAS_ATOMICS_ALLOWED)
            return CUBLAS_STATUS_INVALID_VALUE;
        modes()[handle].atomics = m;
        return CUBLAS_STATUS_SUCCESS;
    });
}

}  // extern "C"
