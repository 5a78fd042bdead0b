// SPDX-License-Identifier: MIT OR Apache-2.0
// Peer copies between two GPUs against the raw driver in the same process,
// interleaved: tf_peer_copy + tf_runtime_sync against cuMemcpyPeerAsync +
// cuStreamSynchronize on a stream of the same source context, with peer
// access enabled for both (the library enables it at its first copy, the
// baseline here explicitly), 256 MiB and 1 GiB, in both directions.  The
// source's primary context stays current, as for a caller inside
// tf_with_context, so the library takes its one-call context check.
//
// With fewer than two devices it prints one INFO line, no RESULT row, and
// exits 0: the bench folder runs on one-GPU machines too.
//
//   bench_peer                 the rows above
//   bench_peer --max-mib N     only sizes up to N MiB
#include <cstring>
#include <string>

#include "bench_util.h"

namespace {

// Only entry points the driver double has too, so the benchmark can be
// smoke-tested without a GPU.
struct Raw {
    PFN_cuDriverGetVersion_v2020 driver_version;
    PFN_cuCtxSetCurrent_v4000 set_current;
    PFN_cuCtxEnablePeerAccess_v4000 enable_peer;
    PFN_cuStreamCreate_v2000 stream_create;
    PFN_cuStreamDestroy_v4000 stream_destroy;
    PFN_cuStreamSynchronize_v2000 stream_sync;
    PFN_cuMemcpyPeerAsync_v4000 copy_peer;
};

Raw load_raw() {
    Raw r{};
    bench::driver_entry("cuDriverGetVersion", 2020, &r.driver_version);
    bench::driver_entry("cuCtxSetCurrent", 4000, &r.set_current);
    bench::driver_entry("cuCtxEnablePeerAccess", 4000, &r.enable_peer);
    bench::driver_entry("cuStreamCreate", 2000, &r.stream_create);
    bench::driver_entry("cuStreamDestroy", 4000, &r.stream_destroy);
    bench::driver_entry("cuStreamSynchronize", 2000, &r.stream_sync);
    bench::driver_entry("cuMemcpyPeerAsync", 4000, &r.copy_peer);
    return r;
}

constexpr size_t MiB = size_t(1) << 20;

// One runtime per device, each with its primary context, a buffer of the
// largest size and the baseline's own stream.
struct Device {
    tf_runtime *rt = nullptr;
    CUcontext ctx = nullptr;
    uint64_t buf = 0;
    CUstream s = nullptr;
    std::string name;
};

struct Bench {
    Raw r;
    Device dev[2];
    int direct[2] = {0, 0};  // direct[s]: device s reaches device 1 - s
};

void open_device(Bench &b, int d, size_t bytes) {
    Device &x = b.dev[d];
    bench::ok(tf_runtime_new(d, &x.rt), "tf_runtime_new");
    void *ctx = nullptr;
    bench::ok(tf_runtime_primary_context(x.rt, &ctx), "tf_runtime_primary_context");
    x.ctx = static_cast<CUcontext>(ctx);
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    bench::ok(tf_runtime_device_info(x.rt, &p), "tf_runtime_device_info");
    x.name = p.name;
    bench::ok(tf_alloc(x.rt, bytes, &x.buf), "tf_alloc");
    bench::ok(tf_runtime_sync(x.rt), "tf_runtime_sync");
    BENCH_CK(b.r.set_current(x.ctx));
    BENCH_CK(b.r.stream_create(&x.s, CU_STREAM_NON_BLOCKING));
}

// The baseline's peer access, the same the library sets up for itself.
void enable_peer_access(Bench &b, int s) {
    int32_t yes = 0;
    bench::ok(tf_peer_copy_available(b.dev[s].rt, b.dev[1 - s].rt, &yes), "tf_peer_copy_available");
    b.direct[s] = yes;
    if (!yes) return;
    BENCH_CK(b.r.set_current(b.dev[s].ctx));
    CUresult rc = b.r.enable_peer(b.dev[1 - s].ctx, 0);
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) BENCH_CK(rc);
}

void copy_rows(Bench &b, int s, size_t n) {
    Device &from = b.dev[s], &to = b.dev[1 - s];
    BENCH_CK(b.r.set_current(from.ctx));
    auto lib = [&] {
        bench::ok(tf_peer_copy(from.rt, from.buf, to.rt, to.buf, n), "tf_peer_copy");
        bench::ok(tf_runtime_sync(from.rt), "tf_runtime_sync");
    };
    auto raw = [&] {
        BENCH_CK(b.r.copy_peer(to.buf, to.ctx, from.buf, from.ctx, n, from.s));
        BENCH_CK(b.r.stream_sync(from.s));
    };
    lib();  // warm: the library's first copy sets up its peer access
    raw();
    const int iters = n >= 1024 * MiB ? 3 : 10, reps = 9;
    double l = 0, r = 0;
    bench::paired_median_ns(iters, reps, lib, raw, &l, &r);
    char id[64], what[160];
    std::snprintf(id, sizeof id, "peer_%dto%d_%zuMiB", s, 1 - s, n / MiB);
    std::snprintf(what, sizeof what, "tf_peer_copy %zu MiB, device %d -> %d (%s), + sync", n / MiB,
                  s, 1 - s, b.direct[s] ? "direct" : "staged by the driver");
    const double lib_gbs = n / l, raw_gbs = n / r;  // bytes per ns = GB/s
    bench::report(id, what, lib_gbs, "cuMemcpyPeerAsync + cuStreamSynchronize", raw_gbs, "GB/s",
                  ">= 0.95x raw", lib_gbs >= 0.95 * raw_gbs);
}

}  // namespace

int main(int argc, char **argv) {
    size_t max_mib = 1024;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--max-mib") && i + 1 < argc) {
            max_mib = std::strtoul(argv[++i], nullptr, 10);
        } else {
            std::fprintf(stderr, "usage: %s [--max-mib N]\n", argv[0]);
            return 2;
        }
    }
    int32_t count = 0;
    const tf_status st = tf_device_count(&count);
    if (st != TF_OK || count < 2) {
        const std::string why =
            st == TF_OK ? "this machine has " + std::to_string(count) + " device(s)"
                        : std::string("tf_device_count failed: ") + tf_last_error_message();
        bench::info("bench_peer", "skipped: it needs 2 devices; " + why);
        return 0;
    }
    Bench b;
    b.r = load_raw();
    const size_t largest = std::min<size_t>(max_mib, 1024) * MiB;
    for (int d = 0; d < 2; ++d) open_device(b, d, largest);
    int driver = 0;
    b.r.driver_version(&driver);
    bench::info("device", b.dev[0].name);
    bench::info("driver", std::to_string(driver));
    enable_peer_access(b, 0);
    enable_peer_access(b, 1);
    bench::info("peer_devices", "0: " + b.dev[0].name + ", 1: " + b.dev[1].name + "; driver " +
                                    std::to_string(driver) +
                                    "; direct access 0->1: " + std::to_string(b.direct[0]) +
                                    ", 1->0: " + std::to_string(b.direct[1]));
    for (size_t mib : {256, 1024})
        if (mib <= max_mib)
            for (int s = 0; s < 2; ++s) copy_rows(b, s, mib * MiB);
    BENCH_CK(b.r.set_current(nullptr));
    for (int d = 0; d < 2; ++d) {
        BENCH_CK(b.r.set_current(b.dev[d].ctx));
        BENCH_CK(b.r.stream_destroy(b.dev[d].s));
        BENCH_CK(b.r.set_current(nullptr));
        bench::ok(tf_free(b.dev[d].rt, b.dev[d].buf), "tf_free");
    }
    for (int d = 0; d < 2; ++d) tf_runtime_release(b.dev[d].rt);
    return 0;
}
