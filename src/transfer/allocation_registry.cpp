// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/allocation_registry.h"

#include <iterator>
#include <new>

#include "util/fork_guard.h"

namespace tf {
namespace {

// Registries get ids from one counter, so a thread's copy of a range can
// never be taken for one of a later registry at the same address.
std::atomic<uint64_t> g_next_registry{1};

// The calling thread's last range found (registry == the one it came from,
// removals == that registry's count when found).  Trivially destructible:
// a thread's exit runs no code of this library.
struct LastFound {
    uint64_t registry, base, size, removals;
    int ordinal;
};
thread_local LastFound t_last{0, 0, 0, 0, -1};

bool inside(uint64_t ptr, uint64_t base, uint64_t size) { return ptr >= base && ptr - base < size; }

// Every live registry (one per device pool), for find_elsewhere.  Lock
// order: this mutex, then a registry's lock.
pthread_mutex_t g_all_mutex = PTHREAD_MUTEX_INITIALIZER;
AllocationRegistry *g_all = nullptr;
std::atomic<int> g_all_count{0};  // with one registry there is no elsewhere
pthread_once_t g_fork_hook_once = PTHREAD_ONCE_INIT;

// Fork child handler (util/fork_guard.h): the thread that held the mutex
// does not exist in the child, and the parent's pools are not the child's.
void registries_after_fork_child() {
    pthread_mutex_init(&g_all_mutex, nullptr);
    g_all = nullptr;
    g_all_count.store(0, std::memory_order_relaxed);
}
void add_fork_hook() { add_fork_child_hook(registries_after_fork_child); }

class AllLocked {
public:
    AllLocked() {
        pthread_once(&g_fork_hook_once, add_fork_hook);  // before the mutex is first held
        pthread_mutex_lock(&g_all_mutex);
    }
    ~AllLocked() { pthread_mutex_unlock(&g_all_mutex); }
    AllLocked(const AllLocked &) = delete;
    AllLocked &operator=(const AllLocked &) = delete;
};

}  // namespace

NodeCache::~NodeCache() {
    while (head_) {
        Free *next = head_->next;
        ::operator delete(head_);
        head_ = next;
    }
}

void *NodeCache::take(size_t bytes) {
    if (head_ && bytes == node_bytes_) {
        Free *f = head_;
        head_ = f->next;
        return f;
    }
    return ::operator new(bytes < sizeof(Free) ? sizeof(Free) : bytes);
}

void NodeCache::give(void *p, size_t bytes) {
    if (node_bytes_ == 0) node_bytes_ = bytes;
    if (bytes != node_bytes_) {
        ::operator delete(p);
        return;
    }
    Free *f = static_cast<Free *>(p);
    f->next = head_;
    head_ = f;
}

AllocationRegistry::AllocationRegistry(int ordinal)
    : ranges_(std::less<uint64_t>(), NodeAllocator<std::pair<const uint64_t, Entry>>(&nodes_)),
      ordinal_(ordinal),
      id_(g_next_registry.fetch_add(1, std::memory_order_relaxed)) {
    AllLocked hold;
    next_ = g_all;
    if (g_all) g_all->prev_ = this;
    g_all = this;
    g_all_count.fetch_add(1, std::memory_order_relaxed);
}

AllocationRegistry::~AllocationRegistry() {
    AllLocked hold;
    if (prev_)
        prev_->next_ = next_;
    else if (g_all == this)
        g_all = next_;
    if (next_) next_->prev_ = prev_;
    g_all_count.fetch_sub(1, std::memory_order_relaxed);
}

void AllocationRegistry::removed_locked() {
    removals_.store(removals_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// A dead entry goes quietly; a live one was freed behind the library's back
// (cuMemFree on a tf_alloc address): counted as freed.
AllocationRegistry::Ranges::iterator AllocationRegistry::drop_locked(Ranges::iterator it,
                                                                     bool *removed) {
    if (it->second.live) {
        counters_.in_use -= it->second.size;
        ++counters_.frees;
        *removed = true;
    } else {
        --dead_;
    }
    return ranges_.erase(it);
}

void AllocationRegistry::purge_dead_locked() {
    for (auto it = ranges_.begin(); it != ranges_.end();)
        it = it->second.live ? std::next(it) : ranges_.erase(it);
    dead_ = 0;
}

void AllocationRegistry::add(uint64_t base, size_t size) {
    std::lock_guard<std::mutex> hold(mutex_);
    bool removed = false;
    auto it = ranges_.lower_bound(base);
    if (it != ranges_.begin()) {
        auto before = std::prev(it);
        if (inside(base, before->first, before->second.size)) drop_locked(before, &removed);
    }
    auto reuse = ranges_.end();
    if (it != ranges_.end() && it->first == base) reuse = it++;
    while (it != ranges_.end() && it->first - base < size) it = drop_locked(it, &removed);
    if (reuse == ranges_.end()) {
        ranges_.emplace_hint(it, base, Entry{size, false, true});
    } else {
        if (reuse->second.live) {
            counters_.in_use -= reuse->second.size;
            ++counters_.frees;
            removed = true;
        } else {
            --dead_;
        }
        reuse->second = Entry{size, false, true};
    }
    if (removed) removed_locked();
    ++counters_.allocations;
    counters_.in_use += size;
    if (counters_.in_use > counters_.in_use_peak) counters_.in_use_peak = counters_.in_use;
}

AllocationRegistry::Take AllocationRegistry::take(uint64_t base, bool even_if_recorded,
                                                  size_t *size) {
    std::lock_guard<std::mutex> hold(mutex_);
    auto it = ranges_.find(base);
    if (it == ranges_.end() || !it->second.live) return Take::unknown;
    if (it->second.recorded && !even_if_recorded) return Take::recorded;
    *size = it->second.size;
    counters_.in_use -= it->second.size;
    ++counters_.frees;
    it->second.live = false;
    it->second.recorded = false;
    removed_locked();
    // Bounded: never more dead entries than live ones, past a few.
    if (++dead_ > 64 && dead_ > counters_.allocations - counters_.frees) purge_dead_locked();
    return Take::taken;
}

void AllocationRegistry::untake(size_t size) {
    std::lock_guard<std::mutex> hold(mutex_);
    counters_.in_use += size;
    --counters_.frees;
}

bool AllocationRegistry::mark_recorded(uint64_t ptr, uint64_t *base) {
    std::lock_guard<std::mutex> hold(mutex_);
    auto it = ranges_.upper_bound(ptr);
    if (it == ranges_.begin()) return false;
    --it;
    if (!it->second.live || !inside(ptr, it->first, it->second.size)) return false;
    it->second.recorded = true;
    *base = it->first;
    return true;
}

bool AllocationRegistry::find(uint64_t ptr, KnownAllocation *out) const {
    LastFound &last = t_last;
    if (last.registry == id_ && inside(ptr, last.base, last.size) &&
        last.removals == removals_.load(std::memory_order_acquire)) {
        *out = KnownAllocation{last.base, last.size, last.ordinal};
        return true;
    }
    std::unique_lock<std::mutex> hold(mutex_);
    // Read under the lock: a removal is wholly before this lookup (the
    // range is not found) or after it (the count differs next time).
    const uint64_t removals = removals_.load(std::memory_order_relaxed);
    bool found = false;
    auto it = ranges_.upper_bound(ptr);
    if (it != ranges_.begin()) {
        --it;
        if (it->second.live && inside(ptr, it->first, it->second.size)) {
            *out = KnownAllocation{it->first, it->second.size, ordinal_};
            found = true;
        }
    }
    hold.unlock();
    if (found) last = LastFound{id_, out->base, out->size, removals, ordinal_};
    return found;
}

bool AllocationRegistry::find_elsewhere(uint64_t ptr, KnownAllocation *out) const {
    if (g_all_count.load(std::memory_order_relaxed) <= 1) return false;
    AllLocked hold;
    for (const AllocationRegistry *r = g_all; r; r = r->next_)
        if (r != this && r->find(ptr, out)) return true;
    return false;
}

}  // namespace tf
