/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The soak: N threads mixing every call kind of tenferro_gpu.h for D
// seconds, every status checked, and the process's resources sampled at
// quiescent points (docs/testing.md, section Soak).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tenferro_gpu.h"

namespace soak {

struct Options {
    int threads = 32;
    double seconds = 300;
    double warmup = -1;  // -1: seconds / 6, within 2 .. 60
    double rss_tolerance_mib = 8;
    double device_tolerance_mib = 4;
    // The device pool's reserved memory may grow by this much more than
    // the peak of what was in use (a new peak of demand is no leak).
    double pool_tolerance_mib = 16;
    double progress_every = -1;  // -1: seconds / 10, at least 5
};

// The real libcuda.so.1, reached the way the library reaches it
// (cuGetProcAddress), for the program's own work and the samples.  Loaded
// after the library's first call, so it is the same driver (behind the
// counting shim, when that is in use).
struct RawDriver {
    PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
    PFN_cuMemGetInfo_v3020 cuMemGetInfo = nullptr;
    PFN_cuMemsetD8Async_v3020 cuMemsetD8Async = nullptr;
    PFN_cuMemAlloc_v3020 cuMemAlloc = nullptr;
    PFN_cuMemFree_v3020 cuMemFree = nullptr;
    PFN_cuMemHostAlloc_v2020 cuMemHostAlloc = nullptr;
    PFN_cuMemFreeHost_v2000 cuMemFreeHost = nullptr;
    long (*tfd_live)(int kind) = nullptr;  // the driver double's counters, if it is the double
    void (*tfd_log_clear)() = nullptr;     // and its call log, which grows with every call
    void (*tfd_set_async_pending)(int on) = nullptr;  // events pending until a sync
    long (*tfcd_live)(int kind) = nullptr;  // the counting shim's, if the library loaded it
    std::string shim_path;

    // Returns an empty string, or why the driver cannot be used.
    std::string load();
};

// Unexpected failures, by operation; the first messages kept.
class Errors {
public:
    void note(const char *op, tf_status status, const std::string &message);
    long total() const;
    void print(FILE *out) const;

private:
    static constexpr size_t kKeep = 20;
    mutable std::mutex mu_;
    std::map<std::string, long> by_op_;
    std::vector<std::string> first_;
    long total_ = 0;
};

// Call kinds, counted as they run (and skipped when a library is missing).
enum Kind {
    K_WITH_CONTEXT,
    K_STREAMS,
    K_SYNC,
    K_SGEMM,
    K_STREAM_ENQUEUE,
    K_SLOT_WAIT,
    K_EVENTS,
    K_KERNEL,
    K_MODULE,
    K_NVRTC,
    K_TRANSFER_SMALL,
    K_TRANSFER_STAGED,
    K_TRANSFER_PINNED,
    K_PEER,
    K_RETIRE,
    K_HANDLES,
    K_OWNED_RUNTIME,
    K_ALLOC_CHURN,
    K_KIND_COUNT
};
const char *kind_name(int kind);

// Retirements accepted on one runtime and the releases run for them; the
// release callbacks' user_data.
struct World;
struct Tally {
    World *w = nullptr;
    std::atomic<long> accepted{0}, released{0};
};

using SgemmFn = int32_t (*)(void *handle, int transa, int transb, int m, int n, int k,
                            const float *alpha, const float *a, int lda, const float *b, int ldb,
                            const float *beta, float *c, int ldc);

struct World {
    Options opt;
    RawDriver raw;
    Errors errors;
    tf_runtime *shared = nullptr;  // the long-lived runtime every sharer uses
    void *primary = nullptr;       // its primary context
    int32_t slots = 0;
    tf_module *module = nullptr;  // the fill kernel, loaded once into `shared`
    void *fill = nullptr;
    SgemmFn sgemm = nullptr;  // NULL: cuBLAS not found, cuBLAS kinds skip
    bool nvrtc = false;       // false: NVRTC not found, its kind skips
    std::atomic<long> ops[K_KIND_COUNT] = {};
    std::atomic<long> skips[K_KIND_COUNT] = {};
    std::atomic<long> calls{0};  // library calls made
    // Each slot's stream as first seen: it must never change.
    std::atomic<void *> slot_stream[TF_MAX_STREAM_SLOTS] = {};
    Tally shared_tally;                    // retirements on `shared`
    std::atomic<long> owned_fallbacks{0};  // barrier fallbacks of the short-lived runtimes

    // Quiescence: workers pause between iterations while samples are taken.
    std::mutex mu;
    std::condition_variable cv;
    bool pause = false, stop = false;
    int paused = 0;
};

// Checks a status: false (and the failure noted) unless TF_OK.
bool ok(World &w, const char *op, tf_status st);
// Notes a failed verification.
void mismatch(World &w, const char *what, const std::string &detail);

// xorshift64*: each worker's own numbers, reproducible per thread index.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 1) {}
    uint64_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 0x2545f4914f6cdd1dull;
    }
    uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};

// One worker's iteration on the shared runtime (ops_shared.cpp) and one
// short-lived runtime's whole life (ops_owned.cpp).
struct WorkerBuffers;
WorkerBuffers *make_worker_buffers(World &w);
void free_worker_buffers(World &w, WorkerBuffers *b);
void shared_iteration(World &w, WorkerBuffers &b, Rng &rng);
// Uses every slot of the shared runtime once for each kind of work that
// creates a per-slot resource (stream, scalar staging, staging ring and copy
// threads, cuBLAS handle, order event), so the warm-up leaves none to make.
void prime_slots(World &w);
void owned_iteration(World &w, WorkerBuffers &b, Rng &rng);

// What a sample measures (probe.cpp).
struct Sample {
    double t = 0;
    long ops = 0, errors = 0;
    long rss_kib = 0, threads = 0, copy_threads = 0, fds = 0;
    long device_used_mib = -1;                       // cuMemGetInfo; -1 when the driver lacks it
    long shim[4] = {-1, -1, -1, -1};                 // streams, events, host, device allocs
    long dbl[8] = {-1, -1, -1, -1, -1, -1, -1, -1};  // tfd_live kinds 0..7
    tf_retirement_stats retire{};
    tf_memory_pool_stats pool{};  // the device's pool (tf_memory_stats)
};
Sample take_sample(World &w, double t);
void print_sample(const char *label, const Sample &s);

}  // namespace soak
