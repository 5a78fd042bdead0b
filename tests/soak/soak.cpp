// SPDX-License-Identifier: MIT OR Apache-2.0
// Soak: N threads (default 32) mix every call kind of tenferro_gpu.h for D
// seconds (default 300), checking every status and, now and then, every
// byte they produced.  Three of every four threads share one long-lived
// runtime (through its handle or handles bound to random slots); every
// fourth creates, uses and releases short-lived runtimes of its own.
//
// At three quiescent points (after the warm-up, in the middle, at the end)
// the workers pause between iterations, every slot of the shared runtime is
// synchronized and its retirements polled, and the process is measured: RSS,
// device memory in use, threads (and the library's tf-download copy
// threads), file descriptors, and the streams, events, page-locked and
// device allocations the library holds (through the counting shim, and from
// the driver double's own counters when it is the double).  What a worker
// creates in an iteration is gone by then, so after the warm-up everything
// must stay flat.  The verdict compares the end with the middle.
//
//   soak [--threads N] [--seconds D] [--warmup W] [--rss-tolerance-mib M]
//        [--device-tolerance-mib M] [--pool-tolerance-mib M]
//
// The device pool keeps freed memory, so device memory in use is judged
// net of the pool's reserved bytes, and those are judged against the peak
// of the memory in use: reserved may grow with a new peak of demand, by at
// most the tolerance beyond it.
//
// Exit status 0 when no call failed and nothing grew beyond its tolerance;
// 1 otherwise (also when a worker hangs); 2 when the runtime cannot be
// created at all.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "ops.h"

namespace soak {
namespace {

using clk = std::chrono::steady_clock;

bool parse(int argc, char **argv, Options *o) {
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!v) return false;
        if (!std::strcmp(a, "--threads"))
            o->threads = std::atoi(v);
        else if (!std::strcmp(a, "--seconds"))
            o->seconds = std::atof(v);
        else if (!std::strcmp(a, "--warmup"))
            o->warmup = std::atof(v);
        else if (!std::strcmp(a, "--rss-tolerance-mib"))
            o->rss_tolerance_mib = std::atof(v);
        else if (!std::strcmp(a, "--device-tolerance-mib"))
            o->device_tolerance_mib = std::atof(v);
        else if (!std::strcmp(a, "--pool-tolerance-mib"))
            o->pool_tolerance_mib = std::atof(v);
        else
            return false;
        ++i;
    }
    if (o->warmup < 0) o->warmup = std::min(60.0, std::max(2.0, o->seconds / 6));
    o->progress_every = std::max(5.0, o->seconds / 10);
    return o->threads >= 1 && o->seconds > o->warmup;
}

// The long-lived runtime, its kernel, and which vendor libraries exist.
bool set_up(World &w) {
    tf_runtime_options opts;
    tf_runtime_options_init(&opts, sizeof opts);
    // A queue of one retirement: concurrent retirements overflow into the
    // barrier fallback while others are queued.
    opts.retirement_capacity = 1;
    if (tf_runtime_new_with_options(0, &opts, &w.shared) != TF_OK) {
        std::fprintf(stderr, "soak: cannot create a runtime: %s\n", tf_last_error_message());
        return false;
    }
    std::string why = w.raw.load();
    if (!why.empty()) {
        std::fprintf(stderr, "soak: %s\n", why.c_str());
        return false;
    }
    // Against the double: events stay pending until their stream or they are
    // synchronized, as on a GPU, so retirements pile up and queries say "not
    // yet" (without it the double completes everything at once).
    if (w.raw.tfd_set_async_pending) w.raw.tfd_set_async_pending(1);
    ok(w, "tf_runtime_primary_context", tf_runtime_primary_context(w.shared, &w.primary));
    ok(w, "tf_runtime_slot_count", tf_runtime_slot_count(w.shared, &w.slots));
    if (ok(w, "tf_module_load", tf_module_load(w.shared, kFillPtx, sizeof kFillPtx, &w.module)))
        ok(w, "tf_module_function", tf_module_function(w.module, "tfd_fill_u32", &w.fill));
    void *fn = nullptr;
    tf_status st = tf_cublas_symbol("cublasSgemm_v2", &fn);
    if (st == TF_OK)
        w.sgemm = reinterpret_cast<SgemmFn>(fn);
    else if (st == TF_ERROR_LIBRARY_NOT_FOUND)
        std::printf("cuBLAS not found: SGEMM is skipped (%s)\n", tf_last_error_message());
    else
        ok(w, "tf_cublas_symbol", st);
    tf_program *prog = nullptr;
    st = tf_program_compile(w.shared, kFillSource, nullptr, &prog);
    w.nvrtc = st == TF_OK;
    if (st == TF_ERROR_LIBRARY_NOT_FOUND)
        std::printf("NVRTC not found: run-time compilation is skipped (%s)\n",
                    tf_last_error_message());
    else
        ok(w, "tf_program_compile", st);
    tf_program_release(prog);
    prime_slots(w);
    return w.fill != nullptr;
}

void worker(World &w, int index) {
    Rng rng(static_cast<uint64_t>(index) + 1);
    const bool owner = index % 4 == 3;
    WorkerBuffers *b = make_worker_buffers(w);
    for (;;) {
        {
            std::unique_lock<std::mutex> hold(w.mu);
            while (w.pause && !w.stop) {
                ++w.paused;
                w.cv.notify_all();
                w.cv.wait(hold, [&] { return !w.pause || w.stop; });
                --w.paused;
            }
            if (w.stop) break;
        }
        if (owner)
            owned_iteration(w, *b, rng);
        else
            shared_iteration(w, *b, rng);
        // No call may leave this thread's context changed (it has none).
        CUcontext current = nullptr;
        if (w.raw.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != nullptr)
            mismatch(w, "caller context", "a call left a context current on the calling thread");
    }
    free_worker_buffers(w, b);
}

double since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

// Pauses every worker between iterations, measures, and (unless last) resumes.
Sample quiesce(World &w, clk::time_point t0, bool last) {
    std::unique_lock<std::mutex> hold(w.mu);
    w.pause = true;
    // An iteration takes milliseconds; one that has not ended after two
    // minutes is a hang, and the process cannot be wound down.
    if (!w.cv.wait_for(hold, std::chrono::minutes(2), [&] { return w.paused == w.opt.threads; })) {
        std::printf(
            "soak verdict: FAIL: %d of %d workers did not finish their iteration within "
            "2 minutes (a call hangs)\n",
            w.opt.threads - w.paused, w.opt.threads);
        w.errors.print(stdout);
        std::fflush(stdout);
        std::_Exit(1);
    }
    hold.unlock();
    Sample s = take_sample(w, since(t0));
    hold.lock();
    if (last) w.stop = true;
    w.pause = false;
    hold.unlock();
    w.cv.notify_all();
    return s;
}

// Sleeps until `at` seconds after t0, printing progress on the way.  The
// driver double logs every call it serves; its log is emptied every 100 ms,
// or its growth would be the process's.
void run_until(World &w, clk::time_point t0, double at, double *next_progress) {
    while (since(t0) < at) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (w.raw.tfd_log_clear) w.raw.tfd_log_clear();
        if (since(t0) >= *next_progress) {
            long ops = 0;
            for (auto &k : w.ops) ops += k.load();
            std::printf("progress t=%6.1fs  ops %ld  library calls %ld  errors %ld\n", since(t0),
                        ops, w.calls.load(), w.errors.total());
            std::fflush(stdout);
            *next_progress += w.opt.progress_every;
        }
    }
}

struct Verdict {
    bool pass = true;
    std::string text;
    void exact(const char *what, long from, long to, long allowed = 0) {
        if (from < 0 || to < 0) return;  // not measured
        const long grew = to - from;
        text += std::string(what) + " " + (grew >= 0 ? "+" : "") + std::to_string(grew) + ", ";
        if (grew > allowed) {
            pass = false;
            text += std::string("[") + what + " grew beyond " + std::to_string(allowed) + "], ";
        }
    }
    void mib(const char *what, double from, double to, double tolerance) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s %+.1f MiB (tolerance %.0f), ", what, to - from,
                      tolerance);
        text += buf;
        if (to - from > tolerance) {
            pass = false;
            text += std::string("[") + what + " grew beyond its tolerance], ";
        }
    }
};

int run(World &w) {
    std::printf("soak: %d threads for %.0f s (warm-up %.0f s); driver %s%s\n", w.opt.threads,
                w.opt.seconds, w.opt.warmup, w.raw.tfd_live ? "double" : "libcuda.so.1",
                w.raw.tfcd_live ? (" behind the counting shim " + w.raw.shim_path).c_str()
                                : " (no counting shim)");
    std::vector<std::thread> threads;
    const auto t0 = clk::now();
    for (int i = 0; i < w.opt.threads; ++i) threads.emplace_back(worker, std::ref(w), i);
    double next_progress = w.opt.progress_every;
    run_until(w, t0, w.opt.warmup, &next_progress);
    const Sample start = quiesce(w, t0, false);
    print_sample("start", start);
    run_until(w, t0, (w.opt.warmup + w.opt.seconds) / 2, &next_progress);
    const Sample middle = quiesce(w, t0, false);
    print_sample("middle", middle);
    run_until(w, t0, w.opt.seconds, &next_progress);
    const Sample end = quiesce(w, t0, true);
    print_sample("end", end);
    for (std::thread &t : threads) t.join();

    std::printf("operations by kind (ops run, skipped for a missing library):\n");
    for (int k = 0; k < K_KIND_COUNT; ++k)
        std::printf("  %-28s %10ld%s\n", kind_name(k), w.ops[k].load(),
                    w.skips[k].load()
                        ? (" (" + std::to_string(w.skips[k].load()) + " skipped)").c_str()
                        : "");
    std::printf("library calls: %ld; barrier fallbacks of the short-lived runtimes: %ld\n",
                w.calls.load(), w.owned_fallbacks.load());
    w.errors.print(stdout);

    Verdict v;
    const long errors = w.errors.total();
    if (errors) v.pass = false;
    v.text = "errors " + std::to_string(errors) + "; growth middle -> end: ";
    v.mib("rss", middle.rss_kib / 1024.0, end.rss_kib / 1024.0, w.opt.rss_tolerance_mib);
    const double mib = 1048576.0;
    const double reserved_growth = (static_cast<double>(end.pool.reserved_bytes) -
                                    static_cast<double>(middle.pool.reserved_bytes)) /
                                   mib;
    const double demand_growth =
        (static_cast<double>(end.pool.in_use_peak) - static_cast<double>(middle.pool.in_use_peak)) /
        mib;
    v.mib("pool reserved beyond the peak in use", 0, reserved_growth - demand_growth,
          w.opt.pool_tolerance_mib);
    if (middle.device_used_mib >= 0)
        v.mib("device memory beyond the pool", middle.device_used_mib,
              end.device_used_mib - reserved_growth, w.opt.device_tolerance_mib);
    v.exact("pool memory in use", static_cast<long>(middle.pool.in_use_bytes),
            static_cast<long>(end.pool.in_use_bytes));
    v.exact("threads", middle.threads, end.threads);
    v.exact("tf-download threads", middle.copy_threads, end.copy_threads);
    v.exact("fds", middle.fds, end.fds);
    // The retirement queue keeps one event per retirement it ever had in
    // flight at once: a new peak legitimately adds events.
    const long pool_growth = static_cast<long>(end.retire.max_in_flight) -
                             static_cast<long>(middle.retire.max_in_flight);
    v.exact("shim streams", middle.shim[0], end.shim[0]);
    v.exact("shim events", middle.shim[1], end.shim[1], pool_growth);
    v.exact("shim page-locked", middle.shim[2], end.shim[2]);
    v.exact("shim device allocations", middle.shim[3], end.shim[3]);
    static const char *const kDouble[] = {
        "double streams",       "double events",  "double device allocations",
        "double page-locked",   "double modules", "double cuBLAS handles",
        "double NVRTC programs"};
    for (int k = 0; k < 7; ++k)
        v.exact(kDouble[k], middle.dbl[k], end.dbl[k], k == 1 ? pool_growth : 0);
    if (v.text.size() >= 2) v.text.resize(v.text.size() - 2);
    std::printf("soak verdict: %s: %s\n", v.pass ? "PASS" : "FAIL", v.text.c_str());
    return v.pass ? 0 : 1;
}

}  // namespace
}  // namespace soak

int main(int argc, char **argv) {
    static soak::World w;  // outlives the workers and every release callback
    if (!soak::parse(argc, argv, &w.opt)) {
        std::fprintf(stderr,
                     "usage: soak [--threads N] [--seconds D] [--warmup W] "
                     "[--rss-tolerance-mib M] [--device-tolerance-mib M] "
                     "[--pool-tolerance-mib M]\n");
        return 2;
    }
    w.shared_tally.w = &w;
    if (!soak::set_up(w)) return 2;
    int rc = soak::run(w);
    const long before = w.errors.total();
    soak::ok(w, "tf_module_release", tf_module_release(w.module));
    soak::ok(w, "tf_runtime_release", tf_runtime_release(w.shared));
    if (w.errors.total() != before) {
        std::printf("soak: the final release failed:\n");
        w.errors.print(stdout);
        rc = 1;
    }
    return rc;
}
