// SPDX-License-Identifier: MIT OR Apache-2.0
// Sweeps the internal plan of bulk downloads into pageable memory (the
// constants of src/transfer/download_plan.h and the header's download defaults) on a
// GPU machine, against the driver's own pageable path, in one process.
// Linked with the library's objects, not the shared library: the plan is not
// reachable through the public API.  tools/tuning/pick_download_defaults.py reads
// the log and prints the defaults to set.
//
//   tune_download                 the sweep below (about 2 minutes on an H200
//                                 host with 16 cores; --budget-s caps it)
//   tune_download --smoke         small sizes, a grid that takes every branch
//                                 of the pipeline, every result checked (runs
//                                 against the driver double in make check)
//   tune_download --budget-s S    start no configuration after S seconds
//                                 (default 200; skipped ones are counted in
//                                 SKIP lines)
//
// Stages, in order (a cut budget only shortens the last):
//   DRIVER   the driver's pageable path, touched and fresh, every size
//   CURRENT  the library as compiled (tf_download, default options)
//   FAULT    CPU only: faulting fresh memory in with several threads, by
//            touching or with MADV_POPULATE_WRITE, split evenly or by 2 MiB
//   small    1, 4, 16 MiB: threads x depth/issue order x step scale x
//            min piece x pieces per thread x populate (chunk 16 MiB)
//   spin     one plan, every size, for several spin times, plus downloads
//            after an idle pause ("idle": sleeping threads must be woken)
//   large    64, 256 MiB: threads x chunk x depth/issue x step scale x
//            pieces per thread x populate
//   DRIVER   again, to show drift
// Every line is "TAG key=value ..."; TUNE lines carry the plan and gbps.
// Every configuration is checked first (a download with odd length and
// offsets into touched and fresh memory, compared byte for byte) and every
// measured download is spot-checked (a byte per page): a plan that loses
// bytes stops the run.
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "bench_util.h"
#include "transfer/copy_pool.h"
#include "transfer/download_plan.h"
#include "transfer/fresh_pages.h"
#include "runtime/runtime_handle.h"
#include "transfer/staged_download.h"
#include "transfer/transfer_slot.h"
#include "util/error.h"

namespace {

constexpr size_t KiB = size_t(1) << 10, MiB = size_t(1) << 20;
const char kOp[] = "tune_download";

struct Plan {
    unsigned threads = 12;
    size_t chunk = 16 * MiB;
    tf::DownloadPlan plan;
    unsigned spin_us = 200;
};

// One size's sampling: touched = reps samples of iters back-to-back
// downloads; fresh = reps downloads, each into a new mapping.
struct Sampling {
    size_t bytes;
    int iters, reps, fresh_reps;
};

Sampling sampling_for(size_t n, bool smoke) {
    if (smoke) return {n, 1, 1, 1};
    if (n <= MiB) return {n, 10, 7, 11};
    if (n <= 4 * MiB) return {n, 4, 7, 9};
    if (n <= 16 * MiB) return {n, 2, 5, 5};
    if (n <= 64 * MiB) return {n, 1, 5, 3};
    return {n, 1, 4, 3};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Never-touched anonymous memory: the first write faults every page in.
struct Fresh {
    explicit Fresh(size_t n) : bytes(n) {
        void *m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            std::perror("tune_download: mmap");
            std::exit(1);
        }
        p = static_cast<unsigned char *>(m);
    }
    ~Fresh() { munmap(p, bytes); }
    unsigned char *p;
    size_t bytes;
};

unsigned char pattern_byte(size_t i) {
    return static_cast<unsigned char>((static_cast<uint32_t>(i) * 2654435761u) >> 24 ^ (i >> 12));
}

class Tuner {
public:
    Tuner(tf_runtime *rt, size_t max_bytes, bool smoke)
        : rt_(rt), api_(rt->state->api()), max_(max_bytes), smoke_(smoke) {
        void *primary = nullptr;
        ok(tf_runtime_primary_context(rt, &primary), "tf_runtime_primary_context");
        BENCH_CK(api_.cuCtxSetCurrent(static_cast<CUcontext>(primary)));
        BENCH_CK(api_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
        expect_.resize(max_ + 2 * 4096);
        for (size_t i = 0; i < expect_.size(); ++i) expect_[i] = pattern_byte(i);
        ok(tf_alloc(rt, expect_.size(), &dev_), "tf_alloc");
        ok(tf_upload(rt, expect_.data(), dev_, expect_.size()), "tf_upload");
        ok(tf_runtime_sync(rt), "tf_runtime_sync");
        touched_ = static_cast<unsigned char *>(std::malloc(max_ + 4096));
        if (!touched_) bench::die("malloc");
        std::memset(touched_, 1, max_ + 4096);
        t0_ = bench::clk::now();
    }

    ~Tuner() {
        drop_ring();
        std::free(touched_);
        // The measurements are done; a failed free only needs saying.
        if (tf_free(rt_, dev_) != TF_OK)
            std::fprintf(stderr, "tune_download: tf_free: %s\n", tf_last_error_message());
    }

    double seconds() const { return bench::ns_since(t0_) / 1e9; }
    bool smoke() const { return smoke_; }

    // ---- the driver's pageable path and the library as compiled ----------

    void driver_rows(const char *phase, const std::vector<size_t> &sizes) {
        for (size_t n : sizes) {
            const Sampling s = sampling_for(n, smoke_);
            auto raw = [&](void *dst) {
                BENCH_CK(api_.cuMemcpyDtoHAsync(dst, dev_, n, stream_));
                BENCH_CK(api_.cuStreamSynchronize(stream_));
            };
            row("DRIVER", phase, n, "touched", touched_gbps(s, [&] { raw(touched_); }));
            row("DRIVER", phase, n, "fresh", fresh_gbps(s, [&](void *dst) { raw(dst); }));
        }
    }

    void current_rows(const std::vector<size_t> &sizes) {
        for (size_t n : sizes) {
            const Sampling s = sampling_for(n, smoke_);
            auto lib = [&](void *dst) { ok(tf_download(rt_, dev_, dst, n), "tf_download"); };
            row("CURRENT", "compiled", n, "touched", touched_gbps(s, [&] { lib(touched_); }));
            spot_check(touched_, n);
            row("CURRENT", "compiled", n, "fresh", fresh_gbps(s, lib));
        }
    }

    // ---- plans -----------------------------------------------------------

    void plan_rows(const char *stage, const Plan &p, const std::vector<size_t> &sizes,
                   bool idle = false) {
        use(p);
        verify(p);
        for (size_t n : sizes) {
            const Sampling s = sampling_for(n, smoke_);
            auto run = [&](void *dst) { download(p, dst, n); };
            tune_row(stage, p, n, "touched", touched_gbps(s, [&] { run(touched_); }));
            spot_check(touched_, n);
            tune_row(stage, p, n, "fresh", fresh_gbps(s, run));
            if (idle) tune_row(stage, p, n, "idle", idle_gbps(s, [&] { run(touched_); }));
        }
    }

private:
    static void ok(tf_status st, const char *what) {
        if (st != TF_OK) bench::die(what);
    }

    // The pool and the ring the plan needs, rebuilt only when they change.
    void use(const Plan &p) {
        if (!pool_made_ || pool_threads_ != p.threads || pool_spin_ != p.spin_us) {
            pool_.reset();
            if (p.threads > 1) {
                pool_.reset(new tf::CopyPool(std::chrono::microseconds(p.spin_us)));
                int error = 0;
                if (pool_->start(p.threads - 1, &error) != p.threads - 1) {
                    std::fprintf(stderr, "tune_download: pthread_create: %s\n",
                                 std::strerror(error));
                    std::exit(1);
                }
            }
            pool_made_ = true;
            pool_threads_ = p.threads;
            pool_spin_ = p.spin_us;
        }
        if (ring_.ring.bytes != p.chunk || ring_.ring.depth != p.plan.depth) {
            drop_ring();
            ok(tf::ensure_staging_ring(api_, p.chunk, p.plan.depth, ring_), "ensure_staging_ring");
        }
    }

    void drop_ring() {
        if (ring_.ring.bytes) tf::release_transfer_slot(api_, ring_);
    }

    void download(const Plan &p, void *dst, size_t n, uint64_t src_offset = 0) {
        ok(tf::run_download_plan(api_, stream_, ring_.ring, pool_.get(), p.threads, p.plan,
                                 dev_ + src_offset, dst, n),
           "run_download_plan");
    }

    // An odd length at odd offsets, into touched and into fresh memory,
    // compared byte for byte: every step, piece and edge of this plan.
    void verify(const Plan &p) {
        const size_t n = std::min(max_, smoke_ ? MiB + 12345 : 3 * MiB + 12345);
        const uint64_t off = 5;
        std::memset(touched_, 0, n + 3 + 64);
        download(p, touched_ + 3, n, off);
        compare(touched_ + 3, n, off, "touched");
        Fresh f(n + 8192);
        download(p, f.p + 4093, n, off);
        compare(f.p + 4093, n, off, "fresh");
        if (touched_[0] != 0 || touched_[1] != 0 || touched_[2] != 0 || touched_[n + 3] != 0)
            fail("wrote outside the destination");
    }

    void compare(const unsigned char *got, size_t n, uint64_t off, const char *what) {
        if (std::memcmp(got, expect_.data() + off, n) != 0) fail(what);
    }

    // A byte per page and the last one.
    void spot_check(const unsigned char *got, size_t n) {
        for (size_t i = 0; i < n; i += 4093)
            if (got[i] != expect_[i]) fail("spot check");
        if (got[n - 1] != expect_[n - 1]) fail("spot check (last byte)");
    }

    [[noreturn]] static void fail(const char *what) {
        std::printf("MISMATCH what=%s\n", what);
        std::fprintf(stderr, "tune_download: a download lost bytes (%s): results invalid\n", what);
        std::exit(1);
    }

    template <class F>
    double touched_gbps(const Sampling &s, F &&once) {
        once();  // warm: staging, threads, pages
        std::vector<double> v;
        for (int r = 0; r < s.reps; ++r) {
            auto t = bench::clk::now();
            for (int i = 0; i < s.iters; ++i) once();
            v.push_back(s.bytes * static_cast<double>(s.iters) / bench::ns_since(t));
        }
        return median(v);
    }

    template <class F>
    double fresh_gbps(const Sampling &s, F &&into) {
        std::vector<double> v;
        for (int r = 0; r < s.fresh_reps; ++r) {
            Fresh f(s.bytes);
            auto t = bench::clk::now();
            into(f.p);
            v.push_back(s.bytes / bench::ns_since(t));
            spot_check(f.p, s.bytes);
        }
        return median(v);
    }

    // One download after the copy threads had time to fall asleep.
    template <class F>
    double idle_gbps(const Sampling &s, F &&once) {
        std::vector<double> v;
        for (int r = 0; r < s.reps; ++r) {
            std::this_thread::sleep_for(std::chrono::milliseconds(smoke_ ? 1 : 5));
            auto t = bench::clk::now();
            once();
            v.push_back(s.bytes / bench::ns_since(t));
        }
        return median(v);
    }

    static void row(const char *tag, const char *phase, size_t n, const char *kind, double gbps) {
        std::printf("%s phase=%s size=%zu kind=%s gbps=%.3f\n", tag, phase, n, kind, gbps);
        std::fflush(stdout);
    }

    void tune_row(const char *stage, const Plan &p, size_t n, const char *kind, double gbps) {
        const tf::DownloadPlan &q = p.plan;
        std::printf(
            "TUNE stage=%s size=%zu kind=%s threads=%u chunk=%zu depth=%d issue=%s "
            "step_scale=%zu min_piece=%zu per_thread=%u populate=%d spin_us=%u step=%zu "
            "gbps=%.3f\n",
            stage, n, kind, p.threads, p.chunk, q.depth, q.issue_after_post ? "late" : "early",
            q.step_scale, q.min_piece, q.pieces_per_thread, q.populate_fresh ? 1 : 0, p.spin_us,
            tf::download_step_bytes(n, p.chunk, q.step_scale), gbps);
        std::fflush(stdout);
    }

    tf_runtime *rt_;
    const tf::DriverApi &api_;
    size_t max_;
    bool smoke_;
    CUstream stream_ = nullptr;
    uint64_t dev_ = 0;
    std::vector<unsigned char> expect_;
    unsigned char *touched_ = nullptr;
    std::unique_ptr<tf::CopyPool> pool_;
    bool pool_made_ = false;
    unsigned pool_threads_ = 0, pool_spin_ = 0;
    tf::TransferSlot ring_;
    bench::clk::time_point t0_;
};

// ---- FAULT: faulting fresh memory in on the CPU alone ------------------------

// `threads` threads fault in n fresh bytes: each writes (touch) or populates
// its share, split into equal ranges (even) or dealt out in 2 MiB regions
// round robin (2m).  Returns GB/s of the slowest thread's end.
double fault_gbps(size_t n, unsigned threads, bool populate, bool regions) {
    Fresh f(n);
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    auto share = [&](unsigned t) {
        while (!go.load(std::memory_order_acquire)) {
        }
        auto work = [&](size_t a, size_t b) {
            if (b <= a) return;
            if (populate)
                tf::populate_for_write(f.p + a, b - a);
            else
                for (size_t i = a; i < b; i += 4096) f.p[i] = 1;
        };
        if (regions) {
            for (size_t r = t * 2 * MiB; r < n; r += size_t(threads) * 2 * MiB)
                work(r, std::min(n, r + 2 * MiB));
        } else {
            const size_t per = (n / threads + 4095) / 4096 * 4096;
            work(std::min(n, t * per), std::min(n, (t + 1) * per));
        }
    };
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(share, t);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto t0 = bench::clk::now();
    go.store(true, std::memory_order_release);
    share(0);
    for (auto &th : pool) th.join();
    return n / bench::ns_since(t0);
}

void fault_rows(bool smoke) {
    const std::vector<size_t> sizes =
        smoke ? std::vector<size_t>{4 * MiB} : std::vector<size_t>{4 * MiB, 64 * MiB};
    const std::vector<unsigned> counts =
        smoke ? std::vector<unsigned>{1, 2} : std::vector<unsigned>{1, 8, 12, 16};
    for (size_t n : sizes)
        for (unsigned threads : counts)
            for (int populate = 0; populate < 2; ++populate)
                for (int regions = 0; regions < 2; ++regions) {
                    std::vector<double> v;
                    for (int r = 0; r < (smoke ? 1 : 3); ++r)
                        v.push_back(fault_gbps(n, threads, populate, regions));
                    std::printf("FAULT size=%zu threads=%u mode=%s split=%s gbps=%.3f\n", n,
                                threads, populate ? "populate" : "touch", regions ? "2m" : "even",
                                median(v));
                    std::fflush(stdout);
                }
}

// ---- the grids ---------------------------------------------------------------

struct Grid {
    std::vector<unsigned> threads;
    std::vector<size_t> chunks;
    std::vector<std::pair<int, bool>> pipes;  // depth, issue after post
    std::vector<size_t> scales, min_pieces;
    std::vector<unsigned> per_thread;
    std::vector<int> populate;
};

// Runs every plan of the grid on `sizes`, outermost the parameters that
// rebuild the pool or the ring.  Stops starting plans after `budget` s.
void sweep(Tuner &t, const char *stage, const Grid &g, const std::vector<size_t> &sizes,
           double budget) {
    size_t skipped = 0;
    for (unsigned threads : g.threads)
        for (size_t chunk : g.chunks)
            for (auto pipe : g.pipes)
                for (size_t scale : g.scales)
                    for (size_t min_piece : g.min_pieces)
                        for (unsigned per : g.per_thread)
                            for (int populate : g.populate) {
                                if (t.seconds() > budget) {
                                    ++skipped;
                                    continue;
                                }
                                Plan p;
                                p.threads = threads;
                                p.chunk = chunk;
                                p.plan.depth = pipe.first;
                                p.plan.issue_after_post = pipe.second;
                                p.plan.step_scale = scale;
                                p.plan.min_piece = min_piece;
                                p.plan.pieces_per_thread = per;
                                p.plan.populate_fresh = populate != 0;
                                t.plan_rows(stage, p, sizes);
                            }
    if (skipped) std::printf("SKIP stage=%s configs=%zu reason=budget\n", stage, skipped);
}

std::string file_line(const char *path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line.empty() ? "unknown" : line;
}

void describe(tf_runtime *rt) {
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    if (tf_runtime_device_info(rt, &p) != TF_OK) bench::die("tf_runtime_device_info");
    struct utsname u;
    uname(&u);
    auto info = [](const char *k, const std::string &v) {
        std::string s = v;
        for (char &c : s)
            if (c == ' ') c = '_';
        std::printf("INFO %s=%s\n", k, s.c_str());
    };
    info("device", p.name);
    info("kernel", u.release);
    info("host_cpus", std::to_string(std::thread::hardware_concurrency()));
    info("thp", file_line("/sys/kernel/mm/transparent_hugepage/enabled"));
    info("can_populate", tf::can_populate_pages() ? "1" : "0");
    info("compiled_threads", std::to_string(TF_DEFAULT_DOWNLOAD_THREADS));
    info("compiled_chunk", std::to_string(TF_DEFAULT_DOWNLOAD_CHUNK_BYTES));
}

}  // namespace

int main(int argc, char **argv) {
    // The library's internals it drives report their failures under this
    // name (the public functions it calls name themselves).
    tf::OperationScope operation(kOp);
    bool smoke = false;
    double budget = 200;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--smoke")) {
            smoke = true;
        } else if (!std::strcmp(argv[i], "--budget-s") && i + 1 < argc) {
            budget = std::strtod(argv[++i], nullptr);
        } else {
            std::fprintf(stderr, "usage: %s [--smoke] [--budget-s SECONDS]\n", argv[0]);
            return 2;
        }
    }
    const std::vector<size_t> small = smoke ? std::vector<size_t>{MiB + 17, 3 * MiB}
                                            : std::vector<size_t>{MiB, 4 * MiB, 16 * MiB};
    const std::vector<size_t> large =
        smoke ? std::vector<size_t>{8 * MiB + 5} : std::vector<size_t>{64 * MiB, 256 * MiB};
    std::vector<size_t> all = small;
    all.insert(all.end(), large.begin(), large.end());

    tf_runtime *rt = nullptr;
    if (tf_runtime_new(0, &rt) != TF_OK) bench::die("tf_runtime_new");
    describe(rt);
    {
        Tuner t(rt, all.back(), smoke);
        t.driver_rows("start", all);
        t.current_rows(all);
        fault_rows(smoke);

        const std::vector<std::pair<int, bool>> pipes = {{2, false}, {2, true}, {3, true}};
        Grid g;
        // Likeliest winners first: a cut budget drops 8 threads first.
        g.threads = smoke ? std::vector<unsigned>{1, 3} : std::vector<unsigned>{12, 16, 8};
        g.chunks = {smoke ? 2 * MiB : 16 * MiB};
        g.pipes = pipes;
        g.scales = {64 * KiB, 256 * KiB, MiB, 4 * MiB};
        g.min_pieces = {16 * KiB, 64 * KiB};
        g.per_thread = {1, 2};
        g.populate = {0, 1};
        sweep(t, "small", g, small, budget);

        Plan ref;  // the spin times, on one plan
        if (smoke) {
            ref.threads = 3;
            ref.chunk = MiB;
        }
        for (unsigned spin : {50u, 200u, 1000u}) {
            ref.spin_us = spin;
            if (t.seconds() <= budget) t.plan_rows("spin", ref, all, true);
        }

        Grid l = g;
        l.chunks = smoke ? std::vector<size_t>{MiB, 2 * MiB}
                         : std::vector<size_t>{8 * MiB, 16 * MiB, 32 * MiB};
        l.min_pieces = {16 * KiB};
        sweep(t, "large", l, large, budget);

        t.driver_rows("end", all);
        std::printf("DONE seconds=%.1f\n", t.seconds());
    }
    tf_runtime_release(rt);
    return 0;
}
