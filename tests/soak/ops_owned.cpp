// SPDX-License-Identifier: MIT OR Apache-2.0
// A short-lived runtime's whole life on one worker: created with small
// options (so its staged downloads run several pipeline steps through two
// copy threads, and its retirement queue overflows into barrier fallbacks),
// used for every kind of work, tied to the shared runtime by events and a
// peer copy, and released; then every retirement it accepted must have been
// released exactly once.
#include <cstring>

#include "ops.h"

namespace soak {
namespace {

struct Owned {
    World &w;
    WorkerBuffers &b;
    Rng &rng;
    tf_runtime *rt = nullptr;
    uint64_t big = 0, mats = 0;
};

void staged(Owned &o) {
    const size_t n = kStagedAbove + 1 + o.rng.below(static_cast<uint32_t>(kBig - kStagedAbove - 1));
    fill_pattern(o.b.expect.data(), n, static_cast<uint32_t>(o.rng.next()));
    if (!ok(o.w, "tf_upload", tf_upload(o.rt, o.b.expect.data(), o.big, n))) return;
    download_and_check(
        o.w, o.rt, o.b, o.big, n, [&](size_t i) { return o.b.expect[i]; }, "owned staged");
}

// The fill kernel from PTX, or (one time in four, when NVRTC is there) from
// CUDA C++ compiled at run time.
void kernel(Owned &o) {
    const bool compile = o.rng.below(4) == 0;
    if (compile) o.w.ops[K_NVRTC].fetch_add(1);
    if (compile && !o.w.nvrtc) {
        o.w.skips[K_NVRTC].fetch_add(1);
        return;
    }
    tf_program *prog = nullptr;
    const void *image = kFillPtx;
    size_t size = sizeof kFillPtx;
    if (compile) {
        if (!ok(o.w, "tf_program_compile", tf_program_compile(o.rt, kFillSource, nullptr, &prog)))
            return;
        const char *log = nullptr;
        ok(o.w, "tf_program_log", tf_program_log(prog, &log));
        if (!ok(o.w, "tf_program_image", tf_program_image(prog, &image, &size))) {
            tf_program_release(prog);
            return;
        }
    }
    tf_module *m = nullptr;
    void *fn = nullptr;
    if (ok(o.w, "tf_module_load", tf_module_load(o.rt, image, size, &m))) {
        if (ok(o.w, "tf_module_function", tf_module_function(m, "tfd_fill_u32", &fn)))
            launch_and_check(o.w, o.rt, o.b, fn, o.rng, 0);
        ok(o.w, "tf_module_release", tf_module_release(m));
    }
    tf_program_release(prog);
}

// Events both ways between the short-lived runtime and the shared one.
void cross_events(Owned &o) {
    tf_event *mine = nullptr, *theirs = nullptr;
    if (ok(o.w, "tf_event_new", tf_event_new(o.rt, &mine))) {
        ok(o.w, "tf_event_record", tf_event_record(o.rt, mine));
        ok(o.w, "tf_event_wait", tf_event_wait(o.w.shared, mine));
        ok(o.w, "tf_event_release", tf_event_release(mine));
    }
    if (ok(o.w, "tf_event_new", tf_event_new(o.w.shared, &theirs))) {
        ok(o.w, "tf_event_record", tf_event_record(o.w.shared, theirs));
        ok(o.w, "tf_event_wait", tf_event_wait(o.rt, theirs));
        ok(o.w, "tf_event_synchronize", tf_event_synchronize(theirs));
        ok(o.w, "tf_event_release", tf_event_release(theirs));
    }
}

// Work through a handle bound to each slot of the short-lived runtime.
void bound_slots(Owned &o) {
    int32_t slots = 0;
    if (!ok(o.w, "tf_runtime_slot_count", tf_runtime_slot_count(o.rt, &slots))) return;
    for (int32_t s = 0; s < slots; ++s) {
        tf_runtime *bound = nullptr;
        if (!ok(o.w, "tf_runtime_bind_slot", tf_runtime_bind_slot(o.rt, s, &bound))) continue;
        void *stream = nullptr;
        ok(o.w, "tf_runtime_stream", tf_runtime_stream(bound, &stream));
        ok(o.w, "tf_slot_wait", tf_slot_wait(bound, (s + 1) % slots));
        ok(o.w, "tf_runtime_sync", tf_runtime_sync(bound));
        ok(o.w, "tf_runtime_release", tf_runtime_release(bound));
    }
}

// A copy from this runtime's memory into the shared runtime's (one device).
void peer(Owned &o) {
    const size_t n = 1 + o.rng.below(kSmall);
    fill_pattern(o.b.expect.data(), n, static_cast<uint32_t>(o.rng.next()));
    if (!ok(o.w, "tf_upload", tf_upload(o.rt, o.b.expect.data(), o.big, n))) return;
    if (!ok(o.w, "tf_peer_copy", tf_peer_copy(o.rt, o.big, o.w.shared, o.b.small2, n))) return;
    download_and_check(
        o.w, o.rt, o.b, o.b.small2, n, [&](size_t i) { return o.b.expect[i]; }, "owned peer copy");
}

void use(Owned &o, Tally &tally) {
    staged(o);
    if (o.w.sgemm)
        sgemm_and_check(o.w, o.rt, o.mats, o.rng, o.rng.below(2) == 0);
    else
        o.w.skips[K_SGEMM].fetch_add(1);
    kernel(o);
    cross_events(o);
    bound_slots(o);
    peer(o);
    // Six retirements into a queue of four: the last ones fall back to a
    // barrier while the first are still in flight.
    for (int i = 0; i < 6; ++i) retire_workspace(o.w, o.rt, &tally, 4096);
    ok(o.w, "tf_workspace_poll", tf_workspace_poll(o.rt));
    tf_retirement_stats s;
    tf_retirement_stats_init(&s, sizeof s);
    if (ok(o.w, "tf_workspace_stats", tf_workspace_stats(o.rt, &s))) {
        o.w.owned_fallbacks.fetch_add(static_cast<long>(s.barrier_fallbacks));
        // One thread owns this runtime: the counters are exact.
        if (s.released + s.leaked + s.in_flight != s.deferred + s.barrier_fallbacks ||
            static_cast<long>(s.released + s.in_flight) != tally.accepted.load() || s.leaked != 0)
            mismatch(o.w, "retirement stats", "short-lived runtime's counters disagree");
    }
}

}  // namespace

void owned_iteration(World &w, WorkerBuffers &b, Rng &rng) {
    w.ops[K_OWNED_RUNTIME].fetch_add(1, std::memory_order_relaxed);
    tf_runtime_options opts;
    tf_runtime_options_init(&opts, sizeof opts);
    opts.stream_slots = 1 + rng.below(3);
    opts.cublas_workspace_bytes = 1 << 20;
    opts.retirement_capacity = 4;
    opts.download_threads = 3;
    opts.download_chunk_bytes = TF_MIN_DOWNLOAD_CHUNK_BYTES;
    Owned o{w, b, rng};
    if (!ok(w, "tf_runtime_new_with_options", tf_runtime_new_with_options(0, &opts, &o.rt))) return;
    Tally tally;
    tally.w = &w;
    if (ok(w, "tf_alloc", tf_alloc(o.rt, kBig, &o.big)) &&
        ok(w, "tf_alloc", tf_alloc(o.rt, kMatBytes, &o.mats))) {
        const float scalars[2] = {1.0f, 0.0f};
        ok(w, "tf_upload", tf_upload(o.rt, scalars, o.mats + kAlphaOffset, sizeof scalars));
        use(o, tally);
    }
    ok(w, "tf_runtime_sync", tf_runtime_sync(o.rt));
    ok(w, "tf_free", tf_free(o.rt, o.big));
    ok(w, "tf_free", tf_free(o.rt, o.mats));
    // The shared runtime's slot waited for this runtime's event: finish that
    // before the event's runtime goes.
    ok(w, "tf_runtime_sync", tf_runtime_sync(w.shared));
    ok(w, "tf_runtime_release", tf_runtime_release(o.rt));
    // Teardown ran every pending release.
    if (tally.released.load() != tally.accepted.load())
        mismatch(w, "retirement accounting",
                 "short-lived runtime: " + std::to_string(tally.accepted.load()) + " accepted, " +
                     std::to_string(tally.released.load()) + " released after its release");
}

}  // namespace soak
