// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/allocation_registry.h"

#include <pthread.h>

#include <atomic>
#include <iterator>
#include <map>

#include "util/fork_guard.h"

namespace tf {
namespace {

struct Entry {
    size_t size;
    int ordinal;
    uint64_t domain;
};
using Ranges = std::map<uint64_t, Entry>;  // by base; ranges never overlap

// Made at the first registration and freed at unload (no static
// constructor or destructor runs otherwise); guarded by g_lock.
pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
Ranges *g_ranges = nullptr;
pthread_once_t g_fork_hook_once = PTHREAD_ONCE_INIT;

// Bumped, under the write lock, by every removal: a thread's cached range
// is valid only while this is the count it was found under.
std::atomic<uint64_t> g_removals{0};

// The calling thread's last range found (removals == the count it was
// found under).  Trivially destructible: a thread's exit runs no code of
// this library.
struct LastFound {
    uint64_t base, size, removals;
    int ordinal;
};
thread_local LastFound t_last{0, 0, 0, -1};

// Fork child handler (util/fork_guard.h): the thread that held the lock
// does not exist in the child.  What it was changing is lost at worst,
// which the child never relies on: CUDA is unusable there.
void registry_after_fork_child() { pthread_rwlock_init(&g_lock, nullptr); }
void add_fork_hook() { add_fork_child_hook(registry_after_fork_child); }

__attribute__((destructor)) void free_registry() {
    pthread_rwlock_wrlock(&g_lock);
    delete g_ranges;
    g_ranges = nullptr;
    pthread_rwlock_unlock(&g_lock);
}

class WriteLock {
public:
    WriteLock() {
        pthread_once(&g_fork_hook_once, add_fork_hook);  // before the lock is first held
        pthread_rwlock_wrlock(&g_lock);
    }
    ~WriteLock() { pthread_rwlock_unlock(&g_lock); }
    WriteLock(const WriteLock &) = delete;
    WriteLock &operator=(const WriteLock &) = delete;
};

bool inside(uint64_t ptr, uint64_t base, uint64_t size) { return ptr >= base && ptr - base < size; }

}  // namespace

void register_allocation(uint64_t base, size_t size, int ordinal, uint64_t domain) {
    WriteLock lock;
    if (!g_ranges) g_ranges = new Ranges;
    // A registered range the new one overlaps was freed behind the
    // library's back (cuMemFree on a tf_alloc address): it goes.
    bool removed = false;
    auto it = g_ranges->lower_bound(base);
    if (it != g_ranges->begin() && inside(base, std::prev(it)->first, std::prev(it)->second.size)) {
        g_ranges->erase(std::prev(it));
        removed = true;
    }
    while (it != g_ranges->end() && it->first - base < size) {
        it = g_ranges->erase(it);
        removed = true;
    }
    if (removed) g_removals.fetch_add(1, std::memory_order_release);
    g_ranges->emplace(base, Entry{size, ordinal, domain});
}

void forget_allocation(uint64_t base) {
    WriteLock lock;
    if (!g_ranges || g_ranges->erase(base) == 0) return;
    g_removals.fetch_add(1, std::memory_order_release);
}

void forget_domain(uint64_t domain) {
    WriteLock lock;
    if (!g_ranges) return;
    bool removed = false;
    for (auto it = g_ranges->begin(); it != g_ranges->end();) {
        if (it->second.domain == domain) {
            it = g_ranges->erase(it);
            removed = true;
        } else {
            ++it;
        }
    }
    if (removed) g_removals.fetch_add(1, std::memory_order_release);
}

bool find_allocation(uint64_t ptr, KnownAllocation *out) {
    LastFound &last = t_last;
    if (last.ordinal >= 0 && inside(ptr, last.base, last.size) &&
        last.removals == g_removals.load(std::memory_order_acquire)) {
        *out = KnownAllocation{last.base, last.size, last.ordinal};
        return true;
    }
    pthread_rwlock_rdlock(&g_lock);
    // Read under the lock: a removal is wholly before this lookup (the
    // range is not found) or after it (the count differs next time).
    const uint64_t removals = g_removals.load(std::memory_order_relaxed);
    bool found = false;
    if (g_ranges) {
        auto it = g_ranges->upper_bound(ptr);
        if (it != g_ranges->begin() &&
            inside(ptr, std::prev(it)->first, std::prev(it)->second.size)) {
            --it;
            *out = KnownAllocation{it->first, it->second.size, it->second.ordinal};
            found = true;
        }
    }
    pthread_rwlock_unlock(&g_lock);
    if (found) last = LastFound{out->base, out->size, removals, out->ordinal};
    return found;
}

}  // namespace tf
