// SPDX-License-Identifier: MIT OR Apache-2.0
// The checked building blocks of the operations (ops.h).
#include <cstring>

#include "ops.h"

namespace soak {

void launch_and_check(World &w, tf_runtime *h, WorkerBuffers &b, void *fn, Rng &rng,
                      uint32_t shared_bytes) {
    uint64_t dst = b.small;
    uint32_t value = static_cast<uint32_t>(rng.next());
    uint32_t n = 1 + rng.below(kSmall / 4);
    void *args[] = {&dst, &value, &n};
    tf_launch_config c;
    tf_launch_config_init(&c, sizeof c);
    c.block_x = 128;
    c.grid_x = (n + 127) / 128;
    c.shared_memory_bytes = shared_bytes;
    if (!ok(w, "tf_kernel_launch", tf_kernel_launch(h, fn, &c, args))) return;
    if (!ok(w, "tf_download", tf_download(h, dst, b.host.data(), n * 4u))) return;
    for (uint32_t i = 0; i < n; ++i) {
        uint32_t got;
        std::memcpy(&got, b.host.data() + 4 * i, 4);
        if (got != value)
            return mismatch(
                w, "verify kernel",
                "word " + std::to_string(i) + " of " + std::to_string(n) + " not filled");
    }
}

namespace {

struct Gemm {
    World *w;
    uint64_t a, b, c, alpha, beta;
    bool device_mode;
};

int32_t gemm(void *handle, void *, void *user_data) {
    const Gemm *g = static_cast<const Gemm *>(user_data);
    static const float one = 1.0f, zero = 0.0f;  // read during the call (host pointer mode)
    const float *alpha = g->device_mode ? reinterpret_cast<const float *>(g->alpha) : &one;
    const float *beta = g->device_mode ? reinterpret_cast<const float *>(g->beta) : &zero;
    return g->w->sgemm(handle, 0, 0, kDim, kDim, kDim, alpha, reinterpret_cast<const float *>(g->a),
                       kDim, reinterpret_cast<const float *>(g->b), kDim, beta,
                       reinterpret_cast<float *>(g->c), kDim);
}

// A library's workspace: made with the raw driver, used by queued work.
struct Workspace {
    World *w;
    CUdeviceptr p;
    size_t n;
};

int32_t alloc_and_use(void *stream, void *user_data) {
    Workspace *ws = static_cast<Workspace *>(user_data);
    const RawDriver &raw = ws->w->raw;
    if (raw.cuMemAlloc(&ws->p, ws->n) != CUDA_SUCCESS) {
        ws->p = 0;
        return 1;
    }
    // Queued work that still uses the workspace when it is retired.
    return raw.cuMemsetD8Async(ws->p, 0x5a, ws->n, static_cast<CUstream>(stream)) == CUDA_SUCCESS
               ? 0
               : 2;
}

void release_workspace(void *resource, void *user_data) {
    Tally *t = static_cast<Tally *>(user_data);
    CUcontext current = nullptr;
    t->w->raw.cuCtxGetCurrent(&current);
    if (current != t->w->primary)
        mismatch(*t->w, "retirement release", "the primary context is not current");
    else if (t->w->raw.cuMemFree(reinterpret_cast<CUdeviceptr>(resource)) != CUDA_SUCCESS)
        mismatch(*t->w, "retirement release", "cuMemFree of the workspace failed");
    t->released.fetch_add(1);
}

}  // namespace

void sgemm_and_check(World &w, tf_runtime *h, uint64_t mats, Rng &rng, bool device_mode) {
    float ab[2 * kDim * kDim];
    for (float &x : ab) x = static_cast<float>(rng.below(4));
    if (!ok(w, "tf_upload", tf_upload(h, ab, mats, sizeof ab))) return;
    Gemm g{&w,
           mats,
           mats + kMat,
           mats + 2 * kMat,
           mats + kAlphaOffset,
           mats + kAlphaOffset + sizeof(float),
           device_mode};
    const int32_t mode = device_mode ? TF_CUBLAS_POINTER_MODE_DEVICE : TF_CUBLAS_POINTER_MODE_HOST;
    if (!ok(w, "tf_cublas_enqueue", tf_cublas_enqueue(h, mode, gemm, &g))) return;
    if (rng.below(4) != 0) return;
    float c[kDim * kDim];
    if (!ok(w, "tf_download", tf_download(h, g.c, c, sizeof c))) return;
    const float *a = ab, *b = ab + kDim * kDim;  // column-major
    for (int i = 0; i < kDim; ++i)
        for (int j = 0; j < kDim; ++j) {
            float want = 0;
            for (int k = 0; k < kDim; ++k) want += a[i + k * kDim] * b[k + j * kDim];
            if (c[i + j * kDim] != want)
                return mismatch(w, "verify sgemm",
                                "C(" + std::to_string(i) + "," + std::to_string(j) + ") is wrong");
        }
}

void retire_workspace(World &w, tf_runtime *h, Tally *tally, size_t bytes) {
    Workspace ws{&w, 0, bytes};
    if (!ok(w, "tf_stream_enqueue", tf_stream_enqueue(h, alloc_and_use, &ws))) return;
    // Accepted: the release runs exactly once, now (barrier) or later.
    tally->accepted.fetch_add(1);
    if (!ok(w, "tf_workspace_retire",
            tf_workspace_retire(h, reinterpret_cast<void *>(ws.p), release_workspace, tally)))
        tally->accepted.fetch_sub(1);  // never released: the workspace leaks (counted as an error)
}

}  // namespace soak
