/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The runtime's page-locked host memory: a caching pool of cuMemHostAlloc
// blocks (tf_host_alloc, tf_host_free) and the caller's ranges registered
// with cuMemHostRegister (tf_host_register), the ranges the asynchronous
// copies accept.
//
// Size classes: a request is rounded up to a power of two from 4 KiB up to
// 256 MiB, and above that to a multiple of 64 MiB (less than 25% waste).  A
// freed block goes back to the cache of its class and is handed out again
// for the same class; it goes back to the driver only in trim() (or at
// teardown).
//
// INVARIANT (reuse): a block is handed out again only after every slot
// stream that used it has passed an event recorded on it when it was freed.
// A use is a bit per slot, set by the library's own asynchronous copies
// (begin_use) and by the caller (record_use) ("Locking" below); free
// records one event per used slot (from a small pool of events, so a warm
// pool creates none) and parks the block as a pending free.  Pending frees
// are polled from the oldest on allocate() (one cuEventQuery when nothing
// completed), all of them on trim(), poll() and teardown.  An event that
// cannot be recorded is replaced by waiting for its stream; if that fails
// too, the block is leaked, never reused.
//
// A slot that captures a graph (NOTE [capture]) is never recorded on or
// waited for directly: free and unregister mark a slot's work through its
// CaptureGate, which hands out the fence recorded before the capture while
// the slot captures.  A capture's copies record no use: the capture holds
// the range (hold(), a generation that changes when the memory is freed or
// unregistered), and each launch of the graph records its uses
// (begin_launch()), refused for memory freed since the capture.
//
// Locking: one std::shared_mutex, and a count of the copies' lookups.
// Everything that changes the maps or a range takes the mutex exclusive
// (WriteLock), raises `writing_` and waits until no copy's lookup is
// counted.  A copy's lookup (begin_use) counts itself in `readers_` and,
// unless a writer is in, reads without the mutex: two atomic operations
// where a reader lock costs two and about 90 instructions more; it stays
// counted until the copy is queued, so a concurrent free is ordered after
// the copy.  A lookup that finds a writer in takes the mutex shared
// instead, as the other lookups (record_use, stats) always do.  Use bits
// are set with atomic ORs, only when not set yet.  cuMemHostAlloc,
// cuMemFreeHost, cuMemHostRegister/Unregister and the wait of an
// unregister run outside the mutex (a range in transition is marked and
// refused by lookups).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"
#include "transfer/capture_gate.h"
#include "transfer/orphan_blocks.h"

namespace tf {

// The size class of a request of `bytes` (> 0); 0 when it cannot be
// represented.
size_t host_size_class(size_t bytes);

class HostPool {
public:
    static constexpr int kMaxSlots = TF_MAX_STREAM_SLOTS;

    // `gates`: one per slot, outliving the pool.
    HostPool(int slot_count, CaptureGate *gates);
    // Frees the bookkeeping only: the driver is released by release_all()
    // (teardown with idle streams) or not at all (leaked, forked child).
    ~HostPool();
    HostPool(const HostPool &) = delete;
    HostPool &operator=(const HostPool &) = delete;

    // The primary context is current in every call that takes `api`.
    tf_status allocate(const DriverApi &api, size_t bytes, void **out);
    tf_status free(const DriverApi &api, void *ptr);
    tf_status register_range(const DriverApi &api, void *ptr, size_t bytes);
    tf_status unregister_range(const DriverApi &api, void *ptr);
    // Gives every cached block no stream still uses back to the driver,
    // after polling the pending frees; *released (if not NULL) gets the
    // bytes given back.  Blocks in use and pending frees stay.  The one
    // function every cache release goes through (tf_host_trim, the retry of
    // an allocation out of page-locked memory, another layer's out-of-memory
    // path).  It WAITS FOR THE DEVICE whenever it frees a block:
    // cuMemFreeHost synchronizes (the device's queued work, every stream).
    tf_status trim(const DriverApi &api, uint64_t *released = nullptr);
    // Moves every pending free whose events completed to the cache.  Records
    // no error.
    void poll(const DriverApi &api);
    // No block and no registered range: nothing to release at teardown.
    bool empty() const {
        std::shared_lock<std::shared_mutex> hold(mutex_);
        return ranges_.empty() && events_.empty();
    }
    bool has_pending() const { return pending_count_.load(std::memory_order_relaxed) != 0; }

    // `stream` (slot `slot`) uses the live block or registered range that
    // holds `ptr`.
    tf_status record_use(const void *ptr, int slot, CUstream stream);
    // A synchronous copy between [ptr, ptr + len) and the device failed
    // after it was queued: `stream` may still use every live block and
    // registered range the span touches, so each records the use, as a
    // queued asynchronous copy's does.  Memory the pool does not track is
    // ignored.  Records no error.
    void record_unfinished_copy(const void *ptr, size_t len, int slot, CUstream stream);

    // Held by a copy from the lookup until it is queued: the lookup's count,
    // or the shared mutex when a writer was in.
    class Use {
    public:
        Use() = default;
        ~Use() {
            if (counted_) counted_->fetch_sub(1, std::memory_order_release);
        }
        Use(const Use &) = delete;
        Use &operator=(const Use &) = delete;

    private:
        friend class HostPool;
        std::atomic<uint32_t> *counted_ = nullptr;
        std::shared_lock<std::shared_mutex> lock_;
    };
    // [ptr, ptr + len) lies in one live block or registered range: records
    // the use by `stream` (slot `slot`) and keeps the pool's reader lock in
    // `use`.  Otherwise TF_ERROR_INVALID_ARGUMENT naming `name`.
    tf_status begin_use(const char *name, const void *ptr, size_t len, int slot, CUstream stream,
                        Use *use);

    // A range a captured graph copies to or from: the block or registered
    // range and the generation it had at the capture.
    struct Held {
        uintptr_t base;
        uint64_t generation;
    };
    // As begin_use, for a copy into a capture: checks the range and keeps
    // the reader lock, records no use, and describes the range in *held.
    tf_status hold(const char *name, const void *ptr, size_t len, Held *held, Use *use);
    // A launch of a graph on `stream` (slot `slot`) uses every range of
    // `held`: records the uses and keeps the reader lock in `use` until the
    // launch is queued.  TF_ERROR_INVALID_ARGUMENT when one was freed or
    // unregistered since the capture (nothing recorded).
    tf_status begin_launch(const Held *held, size_t count, int slot, CUstream stream, Use *use);

    void stats(tf_host_pool_stats *out) const;

    // Teardown after every stream was synchronized: cached and pending
    // blocks go back to the driver, registered ranges are unregistered, the
    // events destroyed.  Failures are logged.  Blocks the caller still
    // holds stay, for take_held_blocks().
    void release_all(const DriverApi &api);
    // Teardown: the blocks the caller still holds, taken out of the pool to
    // outlive it (NOTE [blocks outliving their runtime]).  No driver call.
    std::vector<OrphanBlock> take_held_blocks();

private:
    enum class Kind : uint8_t { block, registered };
    enum class Phase : uint8_t { live, freed, changing };
    struct Range {
        uintptr_t base = 0;
        size_t bytes = 0;     // asked for (block) or registered
        size_t capacity = 0;  // the block's size class; 0 for a registered range
        Kind kind = Kind::block;
        Phase phase = Phase::live;
        uint64_t generation = 0;  // new each time the block is handed out or registered
        std::atomic<uint64_t> used[kMaxSlots / 64] = {};
    };
    struct Pending {
        Range *range;
        std::vector<CUevent> events;
        std::vector<CUevent> fences;  // slots' capture fences (CaptureGate): queried, not owned
    };

    class WriteLock;
    tf_status find_use(const char *name, const void *ptr, size_t len, int slot, CUstream stream);
    inline Range *find_locked(uintptr_t p) const;
    tf_status check_locked(const char *name, const void *ptr, size_t len, Range **out) const;
    CUevent take_event_locked(const DriverApi &api);
    bool mark_quietly(const DriverApi &api, int slot, CUstream stream, CUevent own, CUevent *used);
    void mark_used_locked(Range *r, int slot, CUstream stream);
    void cache_locked(Range *r);
    void poll_front_locked(const DriverApi &api);
    void poll_all_locked(const DriverApi &api);
    bool pending_done(const DriverApi &api, const Pending &p) const;
    void finish_pending_locked(std::deque<Pending>::iterator it);
    std::vector<std::unique_ptr<Range>> take_cached_locked();
    tf_status free_to_driver(const DriverApi &api, std::vector<std::unique_ptr<Range>> ranges,
                             uint64_t *released);
    tf_status allocate_from_driver(const DriverApi &api, size_t bytes, size_t capacity, void **out);
    tf_status park_used_locked(const DriverApi &api, Range *r);
    tf_status fail_not_ours(const char *name, const void *ptr, const char *what) const
        __attribute__((cold, noinline));
    tf_status fail_not_allocated(const void *ptr) const __attribute__((cold, noinline));

    // What a copy's lookup reads comes first, together.
    std::atomic<uint32_t> readers_{0};                  // copies' lookups reading without the mutex
    std::atomic<bool> writing_{false};                  // a WriteLock holds the mutex
    std::unique_ptr<std::atomic<CUstream>[]> streams_;  // slot -> stream that used a range
    std::map<uintptr_t, std::unique_ptr<Range>> ranges_;  // every block and registered range
    mutable std::shared_mutex mutex_;
    std::map<size_t, std::vector<Range *>> cached_;  // ready blocks by size class
    std::deque<Pending> pending_;                    // oldest first
    std::vector<CUevent> events_;                    // passed, reusable
    CaptureGate *gates_;                             // per slot
    uint64_t next_generation_ = 1;
    std::atomic<size_t> pending_count_{0};
    tf_host_pool_stats stats_{};
};

}  // namespace tf
