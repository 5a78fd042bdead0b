// SPDX-License-Identifier: MIT OR Apache-2.0
// The soak's shared pieces: the raw driver, error accounting, the kernels.
#include <dlfcn.h>

#include <cstdlib>

#include "soak.h"

namespace soak {

namespace {

template <class Fn>
bool resolve(PFN_cuGetProcAddress_v12000 gpa, const char *name, int version, Fn *out) {
    void *fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
    if (gpa(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
        found != CU_GET_PROC_ADDRESS_SUCCESS || !fn)
        return false;
    *out = reinterpret_cast<Fn>(fn);
    return true;
}

template <class Fn>
void symbol(void *handle, const char *name, Fn *out) {
    void *p = handle ? dlsym(handle, name) : nullptr;
    *out = reinterpret_cast<Fn>(p);
}

}  // namespace

std::string RawDriver::load() {
    // The library has loaded the driver already (directly, or behind the
    // shim): RTLD_NOLOAD finds that same copy.
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return std::string("cannot load libcuda.so.1: ") + dlerror();
    auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
    if (!gpa) return "libcuda.so.1 has no cuGetProcAddress_v2";
    bool all = resolve(gpa, "cuCtxGetCurrent", 4000, &cuCtxGetCurrent) &&
               resolve(gpa, "cuMemsetD8Async", 3020, &cuMemsetD8Async) &&
               resolve(gpa, "cuMemAlloc", 3020, &cuMemAlloc) &&
               resolve(gpa, "cuMemFree", 3020, &cuMemFree) &&
               resolve(gpa, "cuMemHostAlloc", 2020, &cuMemHostAlloc) &&
               resolve(gpa, "cuMemFreeHost", 2000, &cuMemFreeHost);
    if (!all) return "libcuda.so.1 lacks an entry point the soak needs";
    resolve(gpa, "cuMemGetInfo", 3020, &cuMemGetInfo);  // the driver double has none
    symbol(h, "tfd_live", &tfd_live);
    symbol(h, "tfd_log_clear", &tfd_log_clear);
    symbol(h, "tfd_set_async_pending", &tfd_set_async_pending);
    const char *shim = std::getenv("TENFERRO_GPU_CUDA_DRIVER");
    if (shim && *shim) {
        shim_path = shim;
        symbol(dlopen(shim, RTLD_NOW | RTLD_NOLOAD), "tfcd_live", &tfcd_live);
    }
    return "";
}

void Errors::note(const char *op, tf_status status, const std::string &message) {
    std::lock_guard<std::mutex> hold(mu_);
    ++total_;
    ++by_op_[op];
    if (first_.size() < kKeep)
        first_.push_back(std::string(op) + " (status " + std::to_string(status) + "): " + message);
}

long Errors::total() const {
    std::lock_guard<std::mutex> hold(mu_);
    return total_;
}

void Errors::print(FILE *out) const {
    std::lock_guard<std::mutex> hold(mu_);
    std::fprintf(out, "errors by operation (goal 0): %ld in all\n", total_);
    for (const auto &kv : by_op_) std::fprintf(out, "  %-28s %ld\n", kv.first.c_str(), kv.second);
    if (!first_.empty()) std::fprintf(out, "first %zu unexpected errors:\n", first_.size());
    for (const std::string &m : first_) std::fprintf(out, "  %s\n", m.c_str());
}

bool ok(World &w, const char *op, tf_status st) {
    w.calls.fetch_add(1, std::memory_order_relaxed);
    if (st == TF_OK) return true;
    w.errors.note(op, st, tf_last_error_message());
    return false;
}

void mismatch(World &w, const char *what, const std::string &detail) {
    w.errors.note(what, -1, detail);
}

const char *kind_name(int kind) {
    static const char *const names[K_KIND_COUNT] = {"with_context+own work",
                                                    "runtime/slot streams",
                                                    "runtime_sync",
                                                    "cuBLAS SGEMM",
                                                    "stream_enqueue",
                                                    "slot_wait",
                                                    "events",
                                                    "kernel launch",
                                                    "module load/release",
                                                    "NVRTC compile+launch",
                                                    "alloc/upload/copy/download",
                                                    "staged download",
                                                    "page-locked download",
                                                    "peer copy",
                                                    "workspace retire/poll/stats",
                                                    "retain/bind/queries",
                                                    "short-lived runtime",
                                                    "alloc churn (device pool)"};
    return kind >= 0 && kind < K_KIND_COUNT ? names[kind] : "?";
}

}  // namespace soak
