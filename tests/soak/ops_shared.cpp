// SPDX-License-Identifier: MIT OR Apache-2.0
// Operations on the long-lived runtime every sharer uses, through the
// runtime's handle (the calling thread's slot) or a handle bound to a
// random slot.  Each operation checks every status and, now and then, the
// bytes it produced; an iteration ends with the handle's slot synchronized,
// so the next one may use the worker's buffers from any slot.
#include <cstring>

#include "ops.h"

namespace soak {

namespace {

// The raw driver's page-locked allocations need a current context.
struct HostAlloc {
    World *w;
    void *p;
};

int32_t host_alloc(void *user_data) {
    HostAlloc *a = static_cast<HostAlloc *>(user_data);
    return a->w->raw.cuMemHostAlloc(&a->p, kPinned, 0) == CUDA_SUCCESS ? 0 : 1;
}

int32_t host_free(void *user_data) {
    HostAlloc *a = static_cast<HostAlloc *>(user_data);
    return a->w->raw.cuMemFreeHost(a->p) == CUDA_SUCCESS ? 0 : 1;
}

}  // namespace

WorkerBuffers *make_worker_buffers(World &w) {
    auto *b = new WorkerBuffers;
    b->host.resize(kBig);
    b->expect.resize(kBig);
    bool good = ok(w, "tf_alloc", tf_alloc(w.shared, kSmall, &b->small)) &&
                ok(w, "tf_alloc", tf_alloc(w.shared, kSmall, &b->small2)) &&
                ok(w, "tf_alloc", tf_alloc(w.shared, kBig, &b->big)) &&
                ok(w, "tf_alloc", tf_alloc(w.shared, kMatBytes, &b->mats));
    HostAlloc pinned{&w, nullptr};
    if (good &&
        ok(w, "tf_with_context (cuMemHostAlloc)", tf_with_context(w.shared, host_alloc, &pinned)))
        b->pinned = pinned.p;
    // alpha = 1 and beta = 0 for SGEMM in device pointer mode.
    const float scalars[2] = {1.0f, 0.0f};
    ok(w, "tf_upload", tf_upload(w.shared, scalars, b->mats + kAlphaOffset, sizeof scalars));
    ok(w, "tf_runtime_sync", tf_runtime_sync(w.shared));  // usable from every slot
    return b;
}

void free_worker_buffers(World &w, WorkerBuffers *b) {
    ok(w, "tf_runtime_sync", tf_runtime_sync(w.shared));
    for (uint64_t p : {b->small, b->small2, b->big, b->mats})
        ok(w, "tf_free", tf_free(w.shared, p));
    HostAlloc pinned{&w, b->pinned};
    if (b->pinned)
        ok(w, "tf_with_context (cuMemFreeHost)", tf_with_context(w.shared, host_free, &pinned));
    delete b;
}

namespace {

// ---- the caller's own driver work on the slot stream --------------------------

int32_t own_memset(void *user_data) {
    Memset *m = static_cast<Memset *>(user_data);
    CUcontext current = nullptr;
    m->w->raw.cuCtxGetCurrent(&current);
    m->in_primary = current == m->w->primary;
    return m->w->raw.cuMemsetD8Async(m->dst, m->value, m->n, static_cast<CUstream>(m->stream)) ==
                   CUDA_SUCCESS
               ? 0
               : 2;
}

void with_context(World &w, WorkerBuffers &b, Rng &rng, tf_runtime *h) {
    Memset m{&w, nullptr, b.small, static_cast<unsigned char>(rng.next()), 1 + rng.below(kSmall)};
    if (!ok(w, "tf_runtime_stream", tf_runtime_stream(h, &m.stream))) return;
    if (!ok(w, "tf_with_context", tf_with_context(h, own_memset, &m))) return;
    if (!m.in_primary) mismatch(w, "with_context", "the primary context was not current");
    download_and_check(
        w, h, b, b.small, m.n, [&](size_t) { return m.value; }, "own work");
}

void check_stream(World &w, int32_t slot, void *stream) {
    void *expected = nullptr;
    if (w.slot_stream[slot].compare_exchange_strong(expected, stream) || expected == stream) return;
    mismatch(w, "slot stream", "slot " + std::to_string(slot) + "'s stream changed");
}

void streams(World &w, Rng &rng, tf_runtime *h) {
    int32_t slot = -1;
    void *stream = nullptr;
    if (ok(w, "tf_runtime_current_slot", tf_runtime_current_slot(h, &slot)) &&
        ok(w, "tf_runtime_stream", tf_runtime_stream(h, &stream)))
        check_stream(w, slot, stream);
    const int32_t other = static_cast<int32_t>(rng.below(static_cast<uint32_t>(w.slots)));
    if (ok(w, "tf_runtime_slot_stream", tf_runtime_slot_stream(w.shared, other, &stream)))
        check_stream(w, other, stream);
}

void stream_enqueue(World &w, WorkerBuffers &b, Rng &rng, tf_runtime *h) {
    Memset m{&w, nullptr, b.small2, static_cast<unsigned char>(rng.next()), kSmall};
    auto fill = [](void *stream, void *user_data) -> int32_t {
        Memset *f = static_cast<Memset *>(user_data);
        f->stream = stream;
        return own_memset(f);
    };
    if (!ok(w, "tf_stream_enqueue", tf_stream_enqueue(h, fill, &m))) return;
    if (!m.in_primary) mismatch(w, "stream_enqueue", "the primary context was not current");
    if (rng.below(2)) return;
    unsigned char got[TF_SCALAR_DOWNLOAD_MAX_BYTES];
    const size_t len = 1 + rng.below(TF_SCALAR_DOWNLOAD_MAX_BYTES);
    const size_t off = rng.below(static_cast<uint32_t>(kSmall - len));
    if (!ok(w, "tf_download_scalar", tf_download_scalar(h, b.small2 + off, got, len))) return;
    for (size_t i = 0; i < len; ++i)
        if (got[i] != m.value)
            return mismatch(w, "verify scalar", "a byte differs from the memset");
}

void slot_wait(World &w, Rng &rng, tf_runtime *h) {
    ok(w, "tf_slot_wait",
       tf_slot_wait(h, static_cast<int32_t>(rng.below(static_cast<uint32_t>(w.slots)))));
}

void events(World &w, Rng &rng, tf_runtime *h) {
    tf_event *e = nullptr;
    if (!ok(w, "tf_event_new", tf_event_new(h, &e))) return;
    ok(w, "tf_event_record", tf_event_record(h, e));
    tf_runtime *other = bind_random(w, rng);
    if (other) {
        ok(w, "tf_event_wait", tf_event_wait(other, e));
        ok(w, "tf_runtime_release", tf_runtime_release(other));
    }
    int32_t done = -1;
    ok(w, "tf_event_query", tf_event_query(e, &done));
    ok(w, "tf_event_synchronize", tf_event_synchronize(e));
    if (ok(w, "tf_event_query", tf_event_query(e, &done)) && done != 1)
        mismatch(w, "events", "not done after tf_event_synchronize");
    ok(w, "tf_event_retain", tf_event_retain(e));
    ok(w, "tf_event_release", tf_event_release(e));
    ok(w, "tf_event_release", tf_event_release(e));
}

void module_load(World &w, WorkerBuffers &b, Rng &rng, tf_runtime *h) {
    tf_module *m = nullptr;
    // Without the NUL half of the time: the library adds one.
    const size_t size = sizeof kFillPtx - rng.below(2);
    if (!ok(w, "tf_module_load", tf_module_load(h, kFillPtx, size, &m))) return;
    void *fn = nullptr;
    if (ok(w, "tf_module_function", tf_module_function(m, "tfd_fill_u32", &fn))) {
        // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (8): 1 KiB, well inside 48 KiB.
        ok(w, "tf_function_set_attribute", tf_function_set_attribute(m, fn, 8, 1024));
        launch_and_check(w, h, b, fn, rng, 1024);
    }
    ok(w, "tf_module_retain", tf_module_retain(m));
    ok(w, "tf_module_release", tf_module_release(m));
    ok(w, "tf_module_release", tf_module_release(m));
}

void sgemm_op(World &w, WorkerBuffers &b, Rng &rng, tf_runtime *h) {
    if (!w.sgemm) {
        w.skips[K_SGEMM].fetch_add(1);
        return;
    }
    sgemm_and_check(w, h, b.mats, rng, rng.below(4) == 0);
}

void transfer_small(World &w, WorkerBuffers &b, Rng &rng, tf_runtime *h) {
    const size_t n = 1 + rng.below(kSmall);
    uint64_t d1 = 0, d2 = 0;
    if (!ok(w, "tf_alloc", tf_alloc(h, n, &d1))) return;
    if (ok(w, "tf_alloc", tf_alloc(h, n, &d2))) {
        const uint32_t seed = static_cast<uint32_t>(rng.next());
        fill_pattern(b.expect.data(), n, seed);
        if (ok(w, "tf_upload", tf_upload(h, b.expect.data(), d1, n)) &&
            ok(w, "tf_copy", tf_copy(h, d1, d2, n))) {
            download_and_check(
                w, h, b, d2, n, [&](size_t i) { return b.expect[i]; }, "copy");
            unsigned char got[TF_SCALAR_DOWNLOAD_MAX_BYTES];
            const size_t len = n < sizeof got ? n : sizeof got;
            if (ok(w, "tf_download_scalar", tf_download_scalar(h, d2, got, len)) &&
                std::memcmp(got, b.expect.data(), len) != 0)
                mismatch(w, "verify scalar", "bytes differ from the upload");
        }
        ok(w, "tf_free", tf_free(h, d2));
    }
    ok(w, "tf_free", tf_free(h, d1));
}

// The pool's statistics agree with themselves in every snapshot.
void check_pool_stats(World &w) {
    tf_memory_pool_stats s;
    tf_memory_pool_stats_init(&s, sizeof s);
    if (!ok(w, "tf_memory_stats", tf_memory_stats(w.shared, &s))) return;
    if (s.in_use_bytes > s.reserved_bytes || s.reserved_bytes > s.reserved_peak ||
        s.in_use_bytes > s.in_use_peak || s.frees > s.allocations)
        mismatch(w, "memory statistics",
                 "in use " + std::to_string(s.in_use_bytes) + ", reserved " +
                     std::to_string(s.reserved_bytes) + " (peak " +
                     std::to_string(s.reserved_peak) + "), allocations " +
                     std::to_string(s.allocations) + ", frees " + std::to_string(s.frees));
}

// Allocation churn: up to 8 allocations of 256 B .. 4 MiB, each written
// and read back at a random offset (memory the pool hands out again must
// hold exactly what was written), then freed in random order.
void alloc_churn(World &w, WorkerBuffers &b, Rng &rng, tf_runtime *h) {
    uint64_t p[8] = {};
    size_t n[8] = {};
    const int k = 1 + static_cast<int>(rng.below(8));
    for (int i = 0; i < k; ++i) {
        n[i] = (size_t(256) << rng.below(15)) + rng.below(256);
        if (!ok(w, "tf_alloc", tf_alloc(h, n[i], &p[i]))) continue;
        const size_t at = rng.below(static_cast<uint32_t>(n[i] - 16));
        fill_pattern(b.expect.data(), 16, static_cast<uint32_t>(rng.next()));
        unsigned char got[16];
        if (ok(w, "tf_upload", tf_upload(h, b.expect.data(), p[i] + at, 16)) &&
            ok(w, "tf_download_scalar", tf_download_scalar(h, p[i] + at, got, 16)) &&
            std::memcmp(got, b.expect.data(), 16) != 0)
            mismatch(w, "verify churn", "bytes read back differ from those written");
    }
    for (int left = k; left > 0; --left) {
        const int i = static_cast<int>(rng.below(static_cast<uint32_t>(left)));
        if (p[i]) ok(w, "tf_free", tf_free(h, p[i]));
        p[i] = p[left - 1];
    }
    if (rng.below(8) == 0) check_pool_stats(w);
}

void transfer_staged(World &w, WorkerBuffers &b, Rng &rng, tf_runtime *h) {
    const size_t n = kStagedAbove + 1 + rng.below(static_cast<uint32_t>(kBig - kStagedAbove - 1));
    const uint32_t seed = static_cast<uint32_t>(rng.next());
    fill_pattern(b.expect.data(), n, seed);
    if (!ok(w, "tf_upload", tf_upload(h, b.expect.data(), b.big, n))) return;
    download_and_check(
        w, h, b, b.big, n, [&](size_t i) { return b.expect[i]; }, "staged");
}

void transfer_pinned(World &w, WorkerBuffers &b, Rng &rng, tf_runtime *h) {
    if (!b.pinned) return;  // its allocation failed: counted then
    const size_t n = 1 + rng.below(kPinned);
    unsigned char *pinned = static_cast<unsigned char *>(b.pinned);
    fill_pattern(pinned, n, static_cast<uint32_t>(rng.next()));
    std::memcpy(b.expect.data(), pinned, n);
    if (!ok(w, "tf_upload", tf_upload(h, pinned, b.big, n))) return;  // waits: page-locked source
    std::memset(pinned, 0, n);
    if (!ok(w, "tf_download", tf_download(h, b.big, pinned, n))) return;
    if (std::memcmp(pinned, b.expect.data(), n) != 0)
        mismatch(w, "verify pinned", "downloaded bytes differ from the upload");
}

void peer(World &w, WorkerBuffers &b, Rng &rng, tf_runtime *h) {
    int32_t available = -1;
    if (ok(w, "tf_peer_copy_available", tf_peer_copy_available(h, w.shared, &available)) &&
        available != 1)
        mismatch(w, "peer", "one device: tf_peer_copy_available must say 1");
    const size_t n = 1 + rng.below(kSmall);
    fill_pattern(b.expect.data(), n, static_cast<uint32_t>(rng.next()));
    if (!ok(w, "tf_upload", tf_upload(h, b.expect.data(), b.small, n))) return;
    if (!ok(w, "tf_peer_copy", tf_peer_copy(h, b.small, w.shared, b.small2, n))) return;
    download_and_check(
        w, h, b, b.small2, n, [&](size_t i) { return b.expect[i]; }, "peer copy");
}

void retire(World &w, Rng &rng, tf_runtime *h) {
    retire_workspace(w, h, &w.shared_tally, 256 + rng.below(64 << 10));
    if (rng.below(3) == 0) ok(w, "tf_workspace_poll", tf_workspace_poll(h));
    tf_retirement_stats s;
    tf_retirement_stats_init(&s, sizeof s);
    if (!ok(w, "tf_workspace_stats", tf_workspace_stats(h, &s))) return;
    // A barrier fallback in progress on another thread is counted as a
    // fallback before its release: the sum may only lag, never exceed.
    if (s.released + s.leaked + s.in_flight > s.deferred + s.barrier_fallbacks ||
        s.in_flight > s.max_in_flight || s.max_in_flight > s.capacity || s.leaked != 0)
        mismatch(w, "retirement stats", "inconsistent counters");
}

void handles(World &w, Rng &rng, tf_runtime *h) {
    ok(w, "tf_runtime_retain", tf_runtime_retain(w.shared));
    ok(w, "tf_runtime_release", tf_runtime_release(w.shared));
    uint64_t id_a = 0, id_b = 0, dom_a = 0, dom_b = 0;
    void *ctx = nullptr;
    int32_t count = 0, supported = -1;
    if (ok(w, "tf_runtime_identity", tf_runtime_identity(h, &id_a)) &&
        ok(w, "tf_runtime_identity", tf_runtime_identity(w.shared, &id_b)) && id_a != id_b)
        mismatch(w, "identity", "a bound handle has another identity");
    if (ok(w, "tf_runtime_allocation_domain", tf_runtime_allocation_domain(h, &dom_a)) &&
        ok(w, "tf_runtime_allocation_domain", tf_runtime_allocation_domain(w.shared, &dom_b)) &&
        dom_a != dom_b)
        mismatch(w, "allocation domain", "a bound handle has another domain");
    if (ok(w, "tf_runtime_primary_context", tf_runtime_primary_context(h, &ctx)) &&
        ctx != w.primary)
        mismatch(w, "primary context", "changed");
    if (ok(w, "tf_runtime_slot_count", tf_runtime_slot_count(h, &count)) && count != w.slots)
        mismatch(w, "slot count", "changed");
    ok(w, "tf_runtime_supports",
       tf_runtime_supports(h, 1 + static_cast<int32_t>(rng.below(7)), &supported));
    tf_device_properties info;
    tf_device_properties_init(&info, sizeof info);
    ok(w, "tf_runtime_device_info", tf_runtime_device_info(h, &info));
}

}  // namespace

// ---- shared helpers (ops.h) -------------------------------------------------------

void fill_pattern(unsigned char *p, size_t n, uint32_t seed) {
    uint32_t x = seed | 1;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = static_cast<unsigned char>(x);
    }
}

tf_runtime *bind_random(World &w, Rng &rng) {
    const int32_t slot = static_cast<int32_t>(rng.below(static_cast<uint32_t>(w.slots)));
    tf_runtime *bound = nullptr;
    if (!ok(w, "tf_runtime_bind_slot", tf_runtime_bind_slot(w.shared, slot, &bound)))
        return nullptr;
    int32_t current = -1;
    if (ok(w, "tf_runtime_current_slot", tf_runtime_current_slot(bound, &current)) &&
        current != slot)
        mismatch(w, "bound slot", "a bound handle reports another slot");
    return bound;
}

void prime_slots(World &w) {
    uint64_t src = 0;
    std::vector<unsigned char> host(kStagedAbove + 1);
    unsigned char scalar = 0;
    if (!ok(w, "tf_alloc", tf_alloc(w.shared, host.size(), &src))) return;
    std::vector<tf_runtime *> bound(static_cast<size_t>(w.slots), nullptr);
    for (int32_t s = 0; s < w.slots; ++s) {
        if (!ok(w, "tf_runtime_bind_slot", tf_runtime_bind_slot(w.shared, s, &bound[s]))) continue;
        tf_runtime *h = bound[s];
        ok(w, "tf_runtime_sync", tf_runtime_sync(w.shared));  // src is ready on every slot
        ok(w, "tf_download_scalar", tf_download_scalar(h, src, &scalar, 1));  // scalar staging
        ok(w, "tf_download", tf_download(h, src, host.data(), host.size()));  // ring, copy threads
        if (w.sgemm)  // the slot's cuBLAS handle
            ok(w, "tf_cublas_enqueue",
               tf_cublas_enqueue(
                   h, TF_CUBLAS_POINTER_MODE_HOST,
                   [](void *, void *, void *) -> int32_t { return 0; }, nullptr));
    }
    // Each slot's order event is made when another slot first waits for it.
    for (int32_t s = 0; s < w.slots && w.slots > 1; ++s)
        if (bound[s] && bound[(s + 1) % w.slots])
            ok(w, "tf_slot_wait", tf_slot_wait(bound[(s + 1) % w.slots], s));
    for (tf_runtime *h : bound)
        if (h) ok(w, "tf_runtime_release", tf_runtime_release(h));
    ok(w, "tf_free", tf_free(w.shared, src));
    ok(w, "tf_runtime_sync", tf_runtime_sync(w.shared));
}

void shared_iteration(World &w, WorkerBuffers &b, Rng &rng) {
    tf_runtime *bound = rng.below(4) == 0 ? bind_random(w, rng) : nullptr;
    tf_runtime *h = bound ? bound : w.shared;
    // Weights: cheap calls often, compiles and module loads rarely.
    static const int kMix[] = {
        K_WITH_CONTEXT,    K_WITH_CONTEXT, K_STREAMS,        K_STREAMS,        K_SYNC,
        K_SGEMM,           K_SGEMM,        K_SGEMM,          K_STREAM_ENQUEUE, K_STREAM_ENQUEUE,
        K_SLOT_WAIT,       K_SLOT_WAIT,    K_EVENTS,         K_EVENTS,         K_KERNEL,
        K_KERNEL,          K_MODULE,       K_TRANSFER_SMALL, K_TRANSFER_SMALL, K_TRANSFER_STAGED,
        K_TRANSFER_PINNED, K_PEER,         K_RETIRE,         K_RETIRE,         K_HANDLES,
        K_HANDLES,         K_ALLOC_CHURN,  K_ALLOC_CHURN};
    const int kind = kMix[rng.below(sizeof kMix / sizeof kMix[0])];
    w.ops[kind].fetch_add(1, std::memory_order_relaxed);
    switch (kind) {
        case K_WITH_CONTEXT: with_context(w, b, rng, h); break;
        case K_STREAMS: streams(w, rng, h); break;
        case K_SYNC: ok(w, "tf_runtime_sync", tf_runtime_sync(w.shared)); break;
        case K_SGEMM: sgemm_op(w, b, rng, h); break;
        case K_STREAM_ENQUEUE: stream_enqueue(w, b, rng, h); break;
        case K_SLOT_WAIT: slot_wait(w, rng, h); break;
        case K_EVENTS: events(w, rng, h); break;
        case K_KERNEL: launch_and_check(w, h, b, w.fill, rng, 0); break;
        case K_MODULE: module_load(w, b, rng, h); break;
        case K_TRANSFER_SMALL: transfer_small(w, b, rng, h); break;
        case K_TRANSFER_STAGED: transfer_staged(w, b, rng, h); break;
        case K_TRANSFER_PINNED: transfer_pinned(w, b, rng, h); break;
        case K_PEER: peer(w, b, rng, h); break;
        case K_RETIRE: retire(w, rng, h); break;
        case K_HANDLES: handles(w, rng, h); break;
        case K_ALLOC_CHURN: alloc_churn(w, b, rng, h); break;
    }
    ok(w, "tf_runtime_sync", tf_runtime_sync(h));
    if (bound) ok(w, "tf_runtime_release", tf_runtime_release(bound));
}

}  // namespace soak
