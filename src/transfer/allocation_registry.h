/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The live tf_alloc allocations of one device's memory pool
// (runtime/device_pool.h), so that a transfer's address check answers them
// without a driver call, and the pool's counters (tf_memory_stats).
//
// Every tf_alloc adds its range and every tf_free takes it out before the
// driver frees it; the registry goes with the device's pool, at the last
// runtime of the device (its primary context may go then, and the
// driver's address space with it).  A range not found here (foreign
// memory: PyTorch's, CuPy's, dev_alloc's in the tests, another device's,
// or a tf_alloc range of a pool already gone) is asked of the driver
// (transfer/device_range.cpp), so not knowing a range only costs time.
//
// INVARIANT (counters): the counters change only together with the
// ranges, under the registry's mutex, so a snapshot under it sees them
// agree: in_use is the sum of the sizes registered, allocations -
// frees the number of ranges.  in_use grows after the driver allocated and
// shrinks before the driver is asked to free, so it never exceeds what the
// driver holds for the pool (NOTE [memory statistics]).
//
// Lookups are served first from a per-thread copy of the last range found
// (no lock, no atomic read-modify-write), valid while it came from this
// registry and no range has been taken out of it since (its count of
// removals); else under the mutex (one short critical section: a tree
// lookup; a read-write lock measured costlier for tf_alloc and tf_free,
// whose updates are the common case).  A range is only ever trusted
// while it is registered: a freed one is refused again, as the driver
// would.  A freed range stays in the map, marked dead, until its base is
// allocated again (a caching pool hands the same addresses out again and
// again: the pair then costs two lookups, no insertion or removal) or dead
// ranges outnumber live ones; nodes are recycled, so a warm registry
// allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace tf {

struct KnownAllocation {
    uint64_t base = 0;
    size_t size = 0;
    int ordinal = -1;  // the device it lives on
};

// What the pool counts (tf_memory_stats); see the INVARIANT above.
struct MemoryCounters {
    uint64_t in_use = 0;
    uint64_t in_use_peak = 0;
    uint64_t allocations = 0;
    uint64_t frees = 0;
    uint64_t oom_retries = 0;
    uint64_t oom_failures = 0;
    uint64_t trims = 0;
};

// Recycles the nodes of one map: a freed node waits for the next insertion.
class NodeCache {
public:
    NodeCache() = default;
    ~NodeCache();
    NodeCache(const NodeCache &) = delete;
    NodeCache &operator=(const NodeCache &) = delete;
    void *take(size_t bytes);
    void give(void *p, size_t bytes);

private:
    struct Free {
        Free *next;
    };
    Free *head_ = nullptr;
    size_t node_bytes_ = 0;  // the one size recycled (the map's node)
};

template <class T>
struct NodeAllocator {
    using value_type = T;
    NodeCache *cache;
    explicit NodeAllocator(NodeCache *c) : cache(c) {}
    template <class U>
    NodeAllocator(const NodeAllocator<U> &o) : cache(o.cache) {}
    T *allocate(size_t n) { return static_cast<T *>(cache->take(n * sizeof(T))); }
    void deallocate(T *p, size_t n) { cache->give(p, n * sizeof(T)); }
    template <class U>
    bool operator==(const NodeAllocator<U> &o) const {
        return cache == o.cache;
    }
    template <class U>
    bool operator!=(const NodeAllocator<U> &o) const {
        return cache != o.cache;
    }
};

class AllocationRegistry {
public:
    explicit AllocationRegistry(int ordinal);
    ~AllocationRegistry();
    AllocationRegistry(const AllocationRegistry &) = delete;
    AllocationRegistry &operator=(const AllocationRegistry &) = delete;

    // Records the live allocation [base, base + size) and counts it.
    // Throws std::bad_alloc (the caller then frees the allocation).
    void add(uint64_t base, size_t size);

    enum class Take { unknown, recorded, taken };
    // The allocation starting at `base`: taken out and counted as freed
    // (*size), unless it has recorded uses and `even_if_recorded` is false
    // (then `recorded`, nothing changed).  `unknown` if none starts there.
    Take take(uint64_t base, bool even_if_recorded, size_t *size);
    // Counts a taken allocation as live again (its driver free failed).
    void untake(size_t size);

    // Marks the allocation holding `ptr` as having recorded uses; *base its
    // start.  False if none holds it.
    bool mark_recorded(uint64_t ptr, uint64_t *base);

    // True, with *out, when `ptr` lies in a registered allocation.  Never
    // blocks on a writer for longer than one update; allocates nothing.
    bool find(uint64_t ptr, KnownAllocation *out) const;
    // The same over every other registry of the process (the other
    // devices' pools), for the message of an address of another device.
    bool find_elsewhere(uint64_t ptr, KnownAllocation *out) const;

    // Runs f(counters) under the lock: no allocation is added or taken
    // meanwhile.
    template <class F>
    void with_counters(F &&f) const {
        std::lock_guard<std::mutex> hold(mutex_);
        f(static_cast<const MemoryCounters &>(counters_));
    }
    // Runs f(counters) under the lock, to change the rare counters (trims,
    // retries, a reset of the peak).
    template <class F>
    void update_counters(F &&f) {
        std::lock_guard<std::mutex> hold(mutex_);
        f(counters_);
    }

private:
    struct Entry {
        size_t size;
        bool recorded;
        bool live;  // false: freed, kept for its node
    };
    using Ranges = std::map<uint64_t, Entry, std::less<uint64_t>,
                            NodeAllocator<std::pair<const uint64_t, Entry>>>;

    void removed_locked();
    Ranges::iterator drop_locked(Ranges::iterator it, bool *removed);
    void purge_dead_locked();

    mutable std::mutex mutex_;
    NodeCache nodes_;  // before ranges_, which gives its nodes back to it
    Ranges ranges_;    // by base; ranges never overlap
    MemoryCounters counters_;
    size_t dead_ = 0;  // entries marked dead
    const int ordinal_;
    const uint64_t id_;  // tells registries apart in the per-thread copy
    // Bumped under the mutex by every removal: a thread's copy of
    // a range is valid only while this is the count it was found under.
    std::atomic<uint64_t> removals_{0};
    // Every registry of the process, under a process-wide mutex.
    AllocationRegistry *prev_ = nullptr, *next_ = nullptr;
};

}  // namespace tf
