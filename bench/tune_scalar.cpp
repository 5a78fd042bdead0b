// SPDX-License-Identifier: MIT OR Apache-2.0
// Where tf_download_scalar's time goes, and which ScalarReadPlan
// (src/transfer/scalar_read.h) is fastest on this machine.  Linked with the
// library's objects, like tune_download: the plan and the address check are
// internal.  tools/tuning/pick_scalar_plan.py reads the log and prints (with
// --apply writes) the plan's constants.
//
//   tune_scalar           the sweep (a few seconds on an H200)
//   tune_scalar --smoke   one sample of everything, against the driver double
//
// Lines (every value a median of per-call means, in ns):
//   RAW what=... ns=...          driver calls alone, on a stream of its own:
//                                query_idle (cuStreamQuery, idle stream),
//                                write_value_enqueue (cuStreamWriteValue32,
//                                the call alone), copy_sync, copy_flag_spin,
//                                query_copy_flag_spin, kernel_spin, and
//                                busy_alone / busy_copy_sync (20 us kernel
//                                first)
//   CHECK what=... ns=...        the library's address check of a tf_alloc
//                                range (own) and of foreign memory (foreign)
//   LIB what=... ns=...          tf_download_scalar as compiled, idle and
//                                after 20 us of work
//   PLAN stage=idle|busy idle=P busy=P spin_us=S ns=...
//                                read_scalar with that plan through a call
//                                frame (what tf_download_scalar does after
//                                its checks); busy: 20 us kernel + read
// Every read is checked against the value the device holds: a plan that
// reads a wrong value stops the run (MISMATCH line).
#include <cstring>
#include <vector>

#include "bench_util.h"
#include "runtime/call_frame.h"
#include "runtime/runtime_handle.h"
#include "transfer/device_range.h"
#include "transfer/scalar_read.h"
#include "util/error.h"

namespace {

// 20 us of device work: a one-thread kernel that spins on the global timer
// (the driver double runs it as a no-op).
const char kSpinPtx[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n\n"
    ".visible .entry tf_bench_spin(\n\t.param .u64 tf_bench_spin_ns)\n{\n"
    "\t.reg .pred %p;\n\t.reg .u64 %ns, %t0, %t;\n"
    "\tld.param.u64 %ns, [tf_bench_spin_ns];\n"
    "\tmov.u64 %t0, %globaltimer;\n"
    "wait:\n\tmov.u64 %t, %globaltimer;\n\tsub.u64 %t, %t, %t0;\n"
    "\tsetp.lt.u64 %p, %t, %ns;\n\t@%p bra wait;\n\tret;\n}\n";

const uint32_t kValue = 0x5CA1AB1Eu;

void ok(tf_status st, const char *what) {
    if (st != TF_OK) bench::die(what);
}

[[noreturn]] void mismatch(const char *what, uint32_t got) {
    std::printf("MISMATCH what=%s got=0x%08x\n", what, got);
    std::fprintf(stderr, "tune_scalar: %s read 0x%08x, not 0x%08x: results invalid\n", what, got,
                 kValue);
    std::exit(1);
}

class Tuner {
public:
    Tuner(tf_runtime *rt, bool smoke)
        : rt_(rt),
          api_(rt->state->api()),
          iters_(smoke ? 3 : 2000),
          reps_(smoke ? 1 : 9),
          busy_iters_(smoke ? 3 : 500),
          spin_bound_ns_(smoke ? 1e6 : 1e9) {
        void *primary = nullptr;
        ok(tf_runtime_primary_context(rt, &primary), "tf_runtime_primary_context");
        BENCH_CK(api_.cuCtxSetCurrent(static_cast<CUcontext>(primary)));
        BENCH_CK(api_.cuStreamCreate(&own_, CU_STREAM_NON_BLOCKING));
        void *slot = nullptr;
        ok(tf_runtime_stream(rt, &slot), "tf_runtime_stream");
        slot_ = static_cast<CUstream>(slot);
        ok(tf_alloc(rt, 64, &dev_), "tf_alloc");
        ok(tf_upload(rt, &kValue, dev_, 4), "tf_upload");
        BENCH_CK(api_.cuMemAlloc(&foreign_, 64));
        void *box = nullptr;
        BENCH_CK(api_.cuMemHostAlloc(&box, 64, CU_MEMHOSTALLOC_DEVICEMAP));
        box_ = static_cast<unsigned char *>(box);
        std::memset(box_, 0, 64);
        BENCH_CK(api_.cuMemHostGetDevicePointer(&box_dev_, box_, 0));
        BENCH_CK(api_.cuModuleLoadDataEx(&read_module_, tf::kScalarReadPtx, 0, nullptr, nullptr));
        BENCH_CK(api_.cuModuleGetFunction(&read_fn_, read_module_, "tf_read_scalar"));
        BENCH_CK(api_.cuModuleLoadDataEx(&spin_module_, kSpinPtx, 0, nullptr, nullptr));
        BENCH_CK(api_.cuModuleGetFunction(&spin_fn_, spin_module_, "tf_bench_spin"));
        ok(tf_runtime_sync(rt), "tf_runtime_sync");
    }

    ~Tuner() {
        api_.cuModuleUnload(spin_module_);
        api_.cuModuleUnload(read_module_);
        api_.cuMemFreeHost(box_);
        api_.cuMemFree(foreign_);
        if (tf_free(rt_, dev_) != TF_OK)
            std::fprintf(stderr, "tune_scalar: tf_free: %s\n", tf_last_error_message());
        api_.cuStreamDestroy(own_);
    }

    void raw_rows() {
        uint32_t v = 0;
        line("RAW", "query_idle", median_ns([&] { api_.cuStreamQuery(own_); }));
        // The enqueue alone: each write is timed, then waited for untimed.
        std::vector<double> w;
        for (int r = 0; r < reps_; ++r) {
            double total = 0;
            for (int i = 0; i < iters_; ++i) {
                auto t = bench::clk::now();
                BENCH_CK(api_.cuStreamWriteValue32(own_, flag_dev(), ++seq_,
                                                   CU_STREAM_WRITE_VALUE_DEFAULT));
                total += bench::ns_since(t);
                BENCH_CK(api_.cuStreamSynchronize(own_));
            }
            w.push_back(total / iters_);
        }
        line("RAW", "write_value_enqueue", median(w));
        line("RAW", "copy_sync", median_ns([&] {
                 BENCH_CK(api_.cuMemcpyDtoHAsync(&v, dev_, 4, own_));
                 BENCH_CK(api_.cuStreamSynchronize(own_));
             }));
        check("raw copy_sync", v);
        line("RAW", "copy_flag_spin", median_ns([&] { copy_flag(own_, false); }));
        line("RAW", "query_copy_flag_spin", median_ns([&] { copy_flag(own_, true); }));
        line("RAW", "kernel_spin", median_ns([&] { kernel_flag(own_); }));
        // Behind 20 us of work on the library's slot stream.
        line("RAW", "busy_alone", busy_ns([&] { BENCH_CK(api_.cuStreamSynchronize(slot_)); }));
        line("RAW", "busy_copy_sync", busy_ns([&] {
                 BENCH_CK(api_.cuMemcpyDtoHAsync(&v, dev_, 4, slot_));
                 BENCH_CK(api_.cuStreamSynchronize(slot_));
             }));
        line("RAW", "busy_kernel_spin", busy_ns([&] { kernel_flag(slot_); }));
    }

    void check_rows() {
        const tf::RuntimeState &state = *rt_->state;
        line("CHECK", "own",
             median_ns([&] { ok(tf::check_device_range(state, "src", dev_, 4), "own"); }));
        line("CHECK", "foreign",
             median_ns([&] { ok(tf::check_device_range(state, "src", foreign_, 4), "foreign"); }));
    }

    void lib_rows() {
        uint32_t v = 0;
        line("LIB", "idle", median_ns([&] { ok(tf_download_scalar(rt_, dev_, &v, 4), "scalar"); }));
        check("tf_download_scalar", v);
        line("LIB", "busy", busy_ns([&] { ok(tf_download_scalar(rt_, dev_, &v, 4), "scalar"); }));
        check("tf_download_scalar (busy)", v);
    }

    // Idle reads depend on the idle path (and on whether the query is made:
    // idle == busy skips it); busy reads on the busy path.
    void plan_rows(const std::vector<unsigned> &spins) {
        const tf::ScalarPath paths[] = {tf::ScalarPath::copy_sync, tf::ScalarPath::copy_flag,
                                        tf::ScalarPath::kernel};
        for (unsigned spin : spins)
            for (tf::ScalarPath idle : paths)
                for (tf::ScalarPath busy : paths) {
                    tf::ScalarReadPlan plan;
                    plan.idle = idle;
                    plan.busy = busy;
                    plan.spin = std::chrono::microseconds(spin);
                    uint32_t v = 0;
                    auto read = [&] {
                        tf::CallFrame frame(rt_);
                        ok(frame.enter(), "enter");
                        ok(tf::read_scalar(frame, dev_, &v, 4, plan), "read_scalar");
                    };
                    plan_line("idle", plan, median_ns(read));
                    check("plan (idle)", v);
                    plan_line("busy", plan, busy_ns(read));
                    check("plan (busy)", v);
                }
    }

private:
    CUdeviceptr flag_dev() const { return box_dev_ + tf::ScalarMailbox::kFlag; }
    volatile uint32_t *flag() const {
        return reinterpret_cast<volatile uint32_t *>(box_ + tf::ScalarMailbox::kFlag);
    }

    // Spins on the mailbox's flag for seq_, then waits blocking: up to 1 s
    // on a GPU (never reached), 1 ms on the double (its streams run only
    // when waited for).
    void spin(CUstream s) {
        auto t = bench::clk::now();
        while (*flag() != seq_)
            if (bench::ns_since(t) > spin_bound_ns_) {
                BENCH_CK(api_.cuStreamSynchronize(s));
                break;
            }
        uint32_t v;
        std::memcpy(&v, box_, 4);
        check("raw flag read", v);
    }

    void copy_flag(CUstream s, bool query) {
        // The query's answer is not used: right after the previous read's
        // flag the stream may still be retiring its last op.
        if (query) (void)api_.cuStreamQuery(s);
        ++seq_;
        BENCH_CK(api_.cuMemcpyDtoHAsync(box_, dev_, 4, s));
        BENCH_CK(api_.cuStreamWriteValue32(s, flag_dev(), seq_, CU_STREAM_WRITE_VALUE_DEFAULT));
        spin(s);
    }

    void kernel_flag(CUstream s) {
        ++seq_;
        CUdeviceptr from = dev_, to = box_dev_;
        uint32_t n = 4, q = seq_;
        void *params[] = {&from, &to, &n, &q};
        BENCH_CK(api_.cuLaunchKernel(read_fn_, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
        spin(s);
    }

    void work() {
        uint64_t ns = 20000;
        void *params[] = {&ns};
        BENCH_CK(api_.cuLaunchKernel(spin_fn_, 1, 1, 1, 1, 1, 1, 0, slot_, params, nullptr));
    }

    template <class F>
    double median_ns(F &&f) {
        f();  // warm: mailbox, kernel load
        return bench::median_ns_per(iters_, reps_, f);
    }

    // 20 us of work on the slot stream, then f (which must wait for it).
    template <class F>
    double busy_ns(F &&f) {
        auto both = [&] {
            work();
            f();
        };
        both();
        return bench::median_ns_per(busy_iters_, reps_, both);
    }

    static double median(std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    }

    static void check(const char *what, uint32_t got) {
        if (got != kValue) mismatch(what, got);
    }

    static void line(const char *tag, const char *what, double ns) {
        std::printf("%s what=%s ns=%.1f\n", tag, what, ns);
        std::fflush(stdout);
    }

    static void plan_line(const char *stage, const tf::ScalarReadPlan &p, double ns) {
        std::printf("PLAN stage=%s idle=%s busy=%s spin_us=%lld ns=%.1f\n", stage,
                    tf::scalar_path_name(p.idle), tf::scalar_path_name(p.busy),
                    static_cast<long long>(p.spin.count()), ns);
        std::fflush(stdout);
    }

    tf_runtime *rt_;
    const tf::DriverApi &api_;
    const int iters_, reps_, busy_iters_;
    const double spin_bound_ns_;
    CUstream own_ = nullptr, slot_ = nullptr;
    uint64_t dev_ = 0;
    CUdeviceptr foreign_ = 0, box_dev_ = 0;
    unsigned char *box_ = nullptr;
    uint32_t seq_ = 0;
    CUmodule read_module_ = nullptr, spin_module_ = nullptr;
    CUfunction read_fn_ = nullptr, spin_fn_ = nullptr;
};

}  // namespace

int main(int argc, char **argv) {
    bool smoke = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--smoke")) {
            smoke = true;
        } else {
            std::fprintf(stderr, "usage: %s [--smoke]\n", argv[0]);
            return 2;
        }
    }
    tf::OperationScope operation("tune_scalar");
    tf_runtime *rt = nullptr;
    ok(tf_runtime_new(0, &rt), "tf_runtime_new");
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    ok(tf_runtime_device_info(rt, &p), "tf_runtime_device_info");
    std::printf("INFO device=%s\nINFO smoke=%d\n", p.name, smoke ? 1 : 0);
    {
        Tuner t(rt, smoke);
        t.raw_rows();
        t.check_rows();
        t.lib_rows();
        t.plan_rows(smoke ? std::vector<unsigned>{0, 100} : std::vector<unsigned>{20, 100, 500});
        t.raw_rows();  // again, to show drift
    }
    ok(tf_runtime_release(rt), "tf_runtime_release");
    return 0;
}
