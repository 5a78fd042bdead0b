// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/host_pool.h"

#include <algorithm>
#include <thread>

#include "driver/cuda_status.h"
#include "util/error.h"
#include "util/log.h"

namespace tf {
namespace {

constexpr size_t kMinClass = size_t(4) << 10;
constexpr size_t kPowerOfTwoUpTo = size_t(256) << 20;
constexpr size_t kLargeStep = size_t(64) << 20;
constexpr unsigned kAllocFlags = CU_MEMHOSTALLOC_PORTABLE;
constexpr unsigned kRegisterFlags = CU_MEMHOSTREGISTER_PORTABLE;

void *as_ptr(uintptr_t p) { return reinterpret_cast<void *>(p); }

}  // namespace

size_t host_size_class(size_t bytes) {
    if (bytes <= kMinClass) return kMinClass;
    if (bytes <= kPowerOfTwoUpTo) {
        size_t c = kMinClass;
        while (c < bytes) c <<= 1;
        return c;
    }
    if (bytes > SIZE_MAX - kLargeStep) return 0;
    return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

// The mutex exclusive, and no copy's lookup reading without it
// (host_pool.h, "Locking"): a lookup counted before `writing_` was raised
// is waited for; it holds its count only until its copy is queued.
class HostPool::WriteLock {
public:
    explicit WriteLock(HostPool &pool) : pool_(pool), hold_(pool.mutex_) {
        pool_.writing_.store(true, std::memory_order_seq_cst);
        while (pool_.readers_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    }
    ~WriteLock() { unlock(); }
    WriteLock(const WriteLock &) = delete;
    WriteLock &operator=(const WriteLock &) = delete;

    void unlock() {
        if (!hold_.owns_lock()) return;
        pool_.writing_.store(false, std::memory_order_release);
        hold_.unlock();
    }

private:
    HostPool &pool_;
    std::unique_lock<std::shared_mutex> hold_;
};

HostPool::HostPool(int slot_count, CaptureGate *gates)
    : streams_(new std::atomic<CUstream>[slot_count]), gates_(gates) {
    for (int i = 0; i < slot_count; ++i) streams_[i].store(nullptr, std::memory_order_relaxed);
}

HostPool::~HostPool() = default;

inline HostPool::Range *HostPool::find_locked(uintptr_t p) const {
    auto it = ranges_.upper_bound(p);
    if (it == ranges_.begin()) return nullptr;
    --it;
    Range *r = it->second.get();
    const size_t extent = r->kind == Kind::block ? r->capacity : r->bytes;
    return p - r->base < extent ? r : nullptr;
}

tf_status HostPool::fail_not_ours(const char *name, const void *ptr, const char *what) const {
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "%s %p %s", name, ptr, what);
}

tf_status HostPool::fail_not_allocated(const void *ptr) const {
    return fail_not_ours("ptr", ptr,
                         is_orphan_block(ptr)
                             ? "was not allocated by tf_host_alloc of this runtime: it is a "
                               "block whose runtime was released; free it with "
                               "tf_host_free(NULL, ptr)"
                             : "was not allocated by tf_host_alloc of this runtime (pageable "
                               "memory, another runtime's block, or a stale pointer)");
}

// ---- allocation -------------------------------------------------------------------------

tf_status HostPool::allocate(const DriverApi &api, size_t bytes, void **out) {
    const size_t capacity = host_size_class(bytes);
    if (capacity == 0) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "bytes %zu is too large", bytes);
    {
        WriteLock hold(*this);
        poll_front_locked(api);
        auto it = cached_.find(capacity);
        if (it != cached_.end() && !it->second.empty()) {
            Range *r = it->second.back();
            it->second.pop_back();
            r->bytes = bytes;
            r->phase = Phase::live;
            r->generation = next_generation_++;
            stats_.bytes_cached -= capacity;
            --stats_.blocks_cached;
            stats_.bytes_in_use += capacity;
            ++stats_.blocks_in_use;
            *out = as_ptr(r->base);
            return TF_OK;
        }
    }
    return allocate_from_driver(api, bytes, capacity, out);
}

// Outside the lock: pinning memory can take milliseconds.  Out of
// page-locked memory, the cache is trimmed (which waits for the device) and
// the call made once more.
tf_status HostPool::allocate_from_driver(const DriverApi &api, size_t bytes, size_t capacity,
                                         void **out) {
    if (!api.cuMemHostAlloc) return fail_missing("cuMemHostAlloc");
    std::unique_ptr<Range> range(new Range);
    void *p = nullptr;
    CUresult r = api.cuMemHostAlloc(&p, capacity, kAllocFlags);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        uint64_t released = 0;
        {
            KeepLastError keep;  // the retry's answer is the call's
            (void)trim(api, &released);
        }
        if (released != 0) r = api.cuMemHostAlloc(&p, capacity, kAllocFlags);
    }
    if (r != CUDA_SUCCESS)
        return fail_cuda(api, "cuMemHostAlloc", r,
                         r == CUDA_ERROR_OUT_OF_MEMORY
                             ? "page-locked host memory is exhausted (the cache was trimmed)"
                             : "nothing was allocated");
    range->base = reinterpret_cast<uintptr_t>(p);
    range->bytes = bytes;
    range->capacity = capacity;
    try {
        WriteLock hold(*this);
        range->generation = next_generation_++;
        ranges_.emplace(range->base, std::move(range));
        stats_.bytes_in_use += capacity;
        ++stats_.blocks_in_use;
        ++stats_.driver_allocations;
    } catch (...) {
        (void)api.cuMemFreeHost(p);
        throw;
    }
    *out = p;
    return TF_OK;
}

// ---- free ---------------------------------------------------------------------------------

tf_status HostPool::free(const DriverApi &api, void *ptr) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    WriteLock hold(*this);
    Range *r = find_locked(p);
    if (!r) return fail_not_allocated(ptr);
    if (r->kind == Kind::registered)
        return fail_not_ours("ptr", ptr,
                             "lies in a range registered with tf_host_register; release it "
                             "with tf_host_unregister");
    if (r->base != p)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "ptr %p is inside the tf_host_alloc block at %p, not its start", ptr,
                       as_ptr(r->base));
    if (r->phase != Phase::live)
        return fail_not_ours("ptr", ptr, "was already freed (a double free)");
    r->phase = Phase::freed;
    stats_.bytes_in_use -= r->capacity;
    --stats_.blocks_in_use;
    stats_.bytes_cached += r->capacity;
    ++stats_.blocks_cached;
    return park_used_locked(api, r);
}

// A pooled event, or a new one (NULL if none can be made).
CUevent HostPool::take_event_locked(const DriverApi &api) {
    CUevent ev = nullptr;
    if (!events_.empty()) {
        ev = events_.back();
        events_.pop_back();
    } else if (!api.cuEventCreate ||
               api.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        ev = nullptr;
    }
    return ev;
}

// CaptureGate::mark for a call that has a fallback: a failure records no
// error (the fallback's outcome is the call's).
bool HostPool::mark_quietly(const DriverApi &api, int slot, CUstream stream, CUevent own,
                            CUevent *used) {
    KeepLastError keep;
    return gates_[slot].mark(api, stream, own, used) == TF_OK;
}

// A freed block with no recorded use is cached at once; one with uses waits
// behind an event on each stream that used it (or that slot's capture fence
// while it captures a graph: CaptureGate).
tf_status HostPool::park_used_locked(const DriverApi &api, Range *r) {
    Pending pending{r, {}, {}};
    for (int word = 0; word < kMaxSlots / 64; ++word) {
        uint64_t bits = r->used[word].exchange(0, std::memory_order_relaxed);
        for (; bits != 0; bits &= bits - 1) {
            const int slot = word * 64 + __builtin_ctzll(bits);
            CUstream stream = streams_[slot].load(std::memory_order_relaxed);
            CUevent ev = take_event_locked(api), used = nullptr;
            if (ev && mark_quietly(api, slot, stream, ev, &used)) {
                if (used == ev) {
                    pending.events.push_back(ev);
                } else {
                    events_.push_back(ev);
                    pending.fences.push_back(used);
                }
                continue;
            }
            if (ev) events_.push_back(ev);  // unrecorded (or its old record): still usable
            // No event: wait for the stream instead.
            tf_status st = gates_[slot].wait(api, stream);
            if (st != TF_OK) {
                // The device's use cannot be bounded: leak the block.
                for (CUevent e : pending.events) events_.push_back(e);
                stats_.bytes_cached -= r->capacity;
                --stats_.blocks_cached;
                ranges_.erase(r->base);
                return st;
            }
        }
    }
    if (pending.events.empty() && pending.fences.empty()) {
        cache_locked(r);
        return TF_OK;
    }
    pending_.push_back(std::move(pending));
    ++stats_.pending_frees;
    pending_count_.store(pending_.size(), std::memory_order_relaxed);
    return TF_OK;
}

void HostPool::cache_locked(Range *r) { cached_[r->capacity].push_back(r); }

// ---- pending frees ------------------------------------------------------------------------

bool HostPool::pending_done(const DriverApi &api, const Pending &p) const {
    for (const std::vector<CUevent> *list : {&p.events, &p.fences})
        for (CUevent ev : *list)
            if (!api.cuEventQuery || api.cuEventQuery(ev) != CUDA_SUCCESS) return false;
    return true;
}

void HostPool::finish_pending_locked(std::deque<Pending>::iterator it) {
    for (CUevent ev : it->events) events_.push_back(ev);
    cache_locked(it->range);
    --stats_.pending_frees;
}

// A failed query (a faulted context) leaves the block pending: never reused.
void HostPool::poll_front_locked(const DriverApi &api) {
    if (pending_.empty()) return;
    while (!pending_.empty() && pending_done(api, pending_.front())) {
        finish_pending_locked(pending_.begin());
        pending_.pop_front();
    }
    pending_count_.store(pending_.size(), std::memory_order_relaxed);
}

void HostPool::poll_all_locked(const DriverApi &api) {
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (pending_done(api, *it)) {
            finish_pending_locked(it);
            it = pending_.erase(it);
        } else {
            ++it;
        }
    }
    pending_count_.store(pending_.size(), std::memory_order_relaxed);
}

void HostPool::poll(const DriverApi &api) {
    WriteLock hold(*this);
    poll_all_locked(api);
}

// ---- trim -------------------------------------------------------------------------------

// Takes every ready block out of the cache and out of the map, so that an
// address the driver hands out again after the free is a new block.
std::vector<std::unique_ptr<HostPool::Range>> HostPool::take_cached_locked() {
    std::vector<std::unique_ptr<Range>> out;
    for (auto &cls : cached_) {
        for (Range *r : cls.second) {
            stats_.bytes_cached -= r->capacity;
            --stats_.blocks_cached;
            auto it = ranges_.find(r->base);
            out.push_back(std::move(it->second));
            ranges_.erase(it);
        }
    }
    cached_.clear();
    return out;
}

// Blocks the driver refuses to free are leaked (logged); the first refusal
// is the status.  *released gets the bytes freed.
tf_status HostPool::free_to_driver(const DriverApi &api, std::vector<std::unique_ptr<Range>> ranges,
                                   uint64_t *released) {
    tf_status first = TF_OK;
    for (const auto &r : ranges) {
        CUresult res =
            api.cuMemFreeHost ? api.cuMemFreeHost(as_ptr(r->base)) : CUDA_ERROR_NOT_FOUND;
        if (res == CUDA_SUCCESS) {
            if (released) *released += r->capacity;
            continue;
        }
        if (first == TF_OK)
            first = api.cuMemFreeHost ? fail_cuda(api, "cuMemFreeHost", res)
                                      : fail_missing("cuMemFreeHost");
        log(TF_LOG_WARNING, "%s: leaking the page-locked block at %p (%zu bytes)",
            current_operation(), as_ptr(r->base), r->capacity);
    }
    return first;
}

tf_status HostPool::trim(const DriverApi &api, uint64_t *released) {
    std::vector<std::unique_ptr<Range>> cached;
    {
        WriteLock hold(*this);
        poll_all_locked(api);
        cached = take_cached_locked();
    }
    if (released) *released = 0;
    return free_to_driver(api, std::move(cached), released);
}

// ---- registered ranges ----------------------------------------------------------------

tf_status HostPool::register_range(const DriverApi &api, void *ptr, size_t bytes) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    if (bytes > UINTPTR_MAX - p)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "ptr %p + bytes %zu wraps around", ptr, bytes);
    Range *reserved = nullptr;
    {
        WriteLock hold(*this);
        auto next = ranges_.lower_bound(p);
        Range *overlap =
            next != ranges_.end() && next->first < p + bytes ? next->second.get() : find_locked(p);
        if (overlap)
            return TF_FAIL(
                TF_ERROR_INVALID_ARGUMENT,
                "[%p, +%zu) overlaps the %s at %p; a range is registered once", ptr, bytes,
                overlap->kind == Kind::block ? "tf_host_alloc block" : "range registered",
                as_ptr(overlap->base));
        std::unique_ptr<Range> range(new Range);
        range->base = p;
        range->bytes = bytes;
        range->kind = Kind::registered;
        range->phase = Phase::changing;  // refused by lookups until registered
        reserved = range.get();
        ranges_.emplace(p, std::move(range));
    }
    CUresult r = api.cuMemHostRegister ? api.cuMemHostRegister(ptr, bytes, kRegisterFlags)
                                       : CUDA_ERROR_NOT_FOUND;
    WriteLock hold(*this);
    if (r != CUDA_SUCCESS) {
        ranges_.erase(p);
        hold.unlock();
        if (!api.cuMemHostRegister) return fail_missing("cuMemHostRegister");
        if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
            return fail(TF_ERROR_INVALID_ARGUMENT, "cuMemHostRegister", TF_CODE_CUDA, r,
                        "[%p, +%zu) is already page-locked (registered outside this runtime, "
                        "or by another runtime)",
                        ptr, bytes);
        return fail_cuda(api, "cuMemHostRegister", r, "nothing was registered");
    }
    reserved->phase = Phase::live;
    reserved->generation = next_generation_++;
    stats_.bytes_registered += bytes;
    return TF_OK;
}

tf_status HostPool::unregister_range(const DriverApi &api, void *ptr) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    Range *r = nullptr;
    // The work of each slot that used the range, marked under the lock
    // (CaptureGate) and waited for after it; slots no event could mark are
    // waited for directly.
    CUevent own[kMaxSlots], marked[kMaxSlots];
    int unmarked[kMaxSlots];
    int n_marked = 0, n_unmarked = 0;
    {
        WriteLock hold(*this);
        r = find_locked(p);
        if (!r)
            return fail_not_ours("ptr", ptr,
                                 "was not registered with tf_host_register of "
                                 "this runtime");
        if (r->kind == Kind::block)
            return fail_not_ours("ptr", ptr,
                                 "lies in a tf_host_alloc block; give it back with "
                                 "tf_host_free");
        if (r->base != p)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                           "ptr %p is inside the range registered at %p, not its start", ptr,
                           as_ptr(r->base));
        if (r->phase != Phase::live)
            return fail_not_ours("ptr", ptr,
                                 "is being registered or unregistered by "
                                 "another thread");
        r->phase = Phase::changing;
        for (int word = 0; word < kMaxSlots / 64; ++word)
            for (uint64_t bits = r->used[word].load(std::memory_order_relaxed); bits != 0;
                 bits &= bits - 1) {
                const int slot = word * 64 + __builtin_ctzll(bits);
                CUstream stream = streams_[slot].load(std::memory_order_relaxed);
                CUevent ev = take_event_locked(api);
                if (ev && mark_quietly(api, slot, stream, ev, &marked[n_marked])) {
                    own[n_marked++] = ev;
                    continue;
                }
                if (ev) events_.push_back(ev);
                unmarked[n_unmarked++] = slot;
            }
    }
    tf_status st = TF_OK;
    for (int i = 0; i < n_marked && st == TF_OK; ++i)
        st = TF_CU(api, cuEventSynchronize, marked[i]);
    for (int i = 0; i < n_unmarked && st == TF_OK; ++i)
        st = gates_[unmarked[i]].wait(api, streams_[unmarked[i]].load(std::memory_order_relaxed));
    if (st == TF_OK) st = TF_CU(api, cuMemHostUnregister, ptr);
    WriteLock hold(*this);
    for (int i = 0; i < n_marked; ++i) events_.push_back(own[i]);
    if (st != TF_OK) {
        r->phase = Phase::live;
        return st;
    }
    stats_.bytes_registered -= r->bytes;
    ranges_.erase(p);
    return TF_OK;
}

// ---- uses -------------------------------------------------------------------------------

tf_status HostPool::record_use(const void *ptr, int slot, CUstream stream) {
    std::shared_lock<std::shared_mutex> hold(mutex_);
    Range *r = find_locked(reinterpret_cast<uintptr_t>(ptr));
    if (!r || r->phase != Phase::live ||
        (r->kind == Kind::block && reinterpret_cast<uintptr_t>(ptr) - r->base >= r->bytes))
        return fail_not_ours("ptr", ptr,
                             "is not inside a live tf_host_alloc block or tf_host_register "
                             "range of this runtime");
    mark_used_locked(r, slot, stream);
    return TF_OK;
}

// Both are set once per block and slot, then only read: no store, and no
// atomic read-modify-write, on the copies after the first.
void HostPool::mark_used_locked(Range *r, int slot, CUstream stream) {
    if (streams_[slot].load(std::memory_order_relaxed) != stream)
        streams_[slot].store(stream, std::memory_order_relaxed);
    std::atomic<uint64_t> &used = r->used[slot / 64];
    const uint64_t bit = uint64_t(1) << (slot % 64);
    if (!(used.load(std::memory_order_relaxed) & bit))
        used.fetch_or(bit, std::memory_order_relaxed);
}

void HostPool::record_unfinished_copy(const void *ptr, size_t len, int slot, CUstream stream) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    const uintptr_t end = len > UINTPTR_MAX - p ? UINTPTR_MAX : p + len;
    std::shared_lock<std::shared_mutex> hold(mutex_);
    Range *first = find_locked(p);
    if (first && first->phase == Phase::live) mark_used_locked(first, slot, stream);
    for (auto it = ranges_.upper_bound(p); it != ranges_.end() && it->first < end; ++it)
        if (it->second->phase == Phase::live) mark_used_locked(it->second.get(), slot, stream);
}

tf_status HostPool::begin_use(const char *name, const void *ptr, size_t len, int slot,
                              CUstream stream, Use *use) {
    readers_.fetch_add(1, std::memory_order_seq_cst);
    if (!writing_.load(std::memory_order_seq_cst)) {
        use->counted_ = &readers_;  // dropped by ~Use, once the copy is queued (or refused)
        return find_use(name, ptr, len, slot, stream);
    }
    readers_.fetch_sub(1, std::memory_order_release);
    std::shared_lock<std::shared_mutex> hold(mutex_);  // waits for the writer
    tf_status st = find_use(name, ptr, len, slot, stream);
    if (st == TF_OK) use->lock_ = std::move(hold);
    return st;
}

// begin_use's lookup, counted or under the shared mutex.
tf_status HostPool::find_use(const char *name, const void *ptr, size_t len, int slot,
                             CUstream stream) {
    Range *r = nullptr;
    tf_status st = check_locked(name, ptr, len, &r);
    if (st != TF_OK) return st;
    mark_used_locked(r, slot, stream);
    return TF_OK;
}

// [ptr, ptr + len) inside one live block (its bytes asked for) or range.
tf_status HostPool::check_locked(const char *name, const void *ptr, size_t len, Range **out) const {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    Range *r = find_locked(p);
    if (!r || r->phase != Phase::live)
        return fail_not_ours(name, ptr,
                             "is not inside a live tf_host_alloc block or tf_host_register "
                             "range of this runtime: asynchronous copies need page-locked "
                             "memory the runtime tracks (tf_download and tf_upload take any "
                             "host memory)");
    if (p - r->base > r->bytes || len > r->bytes - (p - r->base))
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "%s %p + %zu bytes crosses the end of its %s (%zu bytes at %p)", name, ptr,
                       len, r->kind == Kind::block ? "tf_host_alloc block" : "registered range",
                       r->bytes, as_ptr(r->base));
    *out = r;
    return TF_OK;
}

tf_status HostPool::hold(const char *name, const void *ptr, size_t len, Held *held, Use *use) {
    std::shared_lock<std::shared_mutex> hold(mutex_);
    Range *r = nullptr;
    tf_status st = check_locked(name, ptr, len, &r);
    if (st != TF_OK) return st;
    *held = Held{r->base, r->generation};
    use->lock_ = std::move(hold);
    return TF_OK;
}

tf_status HostPool::begin_launch(const Held *held, size_t count, int slot, CUstream stream,
                                 Use *use) {
    std::shared_lock<std::shared_mutex> hold(mutex_);
    for (size_t i = 0; i < count; ++i) {
        auto it = ranges_.find(held[i].base);
        const Range *r = it == ranges_.end() ? nullptr : it->second.get();
        if (!r || r->phase != Phase::live || r->generation != held[i].generation)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                           "the graph copies to or from the page-locked memory at %p, which was "
                           "freed or unregistered after the capture; capture the graph again",
                           as_ptr(held[i].base));
    }
    streams_[slot].store(stream, std::memory_order_relaxed);
    for (size_t i = 0; i < count; ++i)
        ranges_.find(held[i].base)
            ->second->used[slot / 64]
            .fetch_or(uint64_t(1) << (slot % 64), std::memory_order_relaxed);
    use->lock_ = std::move(hold);
    return TF_OK;
}

// ---- stats and teardown -------------------------------------------------------------------

void HostPool::stats(tf_host_pool_stats *out) const {
    std::shared_lock<std::shared_mutex> hold(mutex_);
    *out = stats_;
}

void HostPool::release_all(const DriverApi &api) {
    WriteLock hold(*this);
    char what[96];
    // Every stream is synchronized: each pending free has completed.
    for (Pending &p : pending_)
        for (CUevent ev : p.events) events_.push_back(ev);
    pending_.clear();
    pending_count_.store(0, std::memory_order_relaxed);
    for (auto it = ranges_.begin(); it != ranges_.end();) {
        Range &r = *it->second;
        if (r.kind == Kind::block && r.phase == Phase::live) {  // the caller's still
            ++it;
            continue;
        }
        CUresult res = CUDA_SUCCESS;
        const char *call = "cuMemFreeHost";
        if (r.kind == Kind::registered) {
            call = "cuMemHostUnregister";
            if (api.cuMemHostUnregister) res = api.cuMemHostUnregister(as_ptr(r.base));
        } else if (api.cuMemFreeHost) {
            res = api.cuMemFreeHost(as_ptr(r.base));
        }
        if (res != CUDA_SUCCESS && res != CUDA_ERROR_DEINITIALIZED)
            log(TF_LOG_WARNING, "tf_runtime_release: %s of %p failed: %s", call, as_ptr(r.base),
                describe_cuda(api, res, what, sizeof what));
        it = ranges_.erase(it);
    }
    for (CUevent ev : events_)
        if (api.cuEventDestroy) (void)api.cuEventDestroy(ev);
    events_.clear();
    cached_.clear();
    stats_ = tf_host_pool_stats{};
}

std::vector<OrphanBlock> HostPool::take_held_blocks() {
    std::unique_lock<std::shared_mutex> hold(mutex_);
    std::vector<OrphanBlock> held;
    for (auto it = ranges_.begin(); it != ranges_.end();) {
        const Range &r = *it->second;
        if (r.kind == Kind::block && r.phase == Phase::live) {
            held.push_back(OrphanBlock{r.base, r.capacity});
            it = ranges_.erase(it);
        } else {
            ++it;
        }
    }
    return held;
}

}  // namespace tf
