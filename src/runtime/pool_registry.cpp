// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/pool_registry.h"

#include <pthread.h>

#include <cstdio>
#include <map>
#include <memory>

#include "util/error.h"
#include "util/fork_guard.h"

namespace tf {
namespace {

struct Entry {
    DevicePool *pool;
    int references;
};
using Pools = std::map<int, Entry>;  // by ordinal

// Made at the first acquire and freed with the last pool: a library loaded
// and unloaded again (dlclose) leaves nothing behind, and at exit, with
// runtimes alive, nothing of the library runs.
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
Pools *g_pools = nullptr;
pthread_once_t g_fork_hook_once = PTHREAD_ONCE_INIT;

// The tables a forked child abandoned, still pointed to: the parent's
// pools are leaked in the child on purpose (their driver objects are not
// the child's), and kept reachable so a leak checker does not report them
// as lost.  Past kAbandoned nested forks the oldest is overwritten.
// volatile: nothing reads them, and the stores must not be optimized away.
constexpr int kAbandoned = 8;
Pools *volatile g_abandoned[kAbandoned];
int g_abandoned_next = 0;

// Fork child handler (util/fork_guard.h): the thread that held the mutex
// does not exist in the child, and the parent's pools are not the child's:
// the child starts with an empty table (the old one is abandoned).  No
// allocation here: a fork child handler must not take malloc's locks.
void pools_after_fork_child() {
    pthread_mutex_init(&g_mutex, nullptr);
    if (g_pools) {
        g_abandoned[g_abandoned_next] = g_pools;
        g_abandoned_next = (g_abandoned_next + 1) % kAbandoned;
    }
    g_pools = nullptr;
}
void add_fork_hook() { add_fork_child_hook(pools_after_fork_child); }

class Locked {
public:
    Locked() {
        pthread_once(&g_fork_hook_once, add_fork_hook);  // before the mutex is first held
        pthread_mutex_lock(&g_mutex);
    }
    ~Locked() { pthread_mutex_unlock(&g_mutex); }
    Locked(const Locked &) = delete;
    Locked &operator=(const Locked &) = delete;
};

const char *describe(uint64_t value, bool limit, char *buf, size_t cap) {
    if (limit && value == 0) return "0 (no limit)";
    if (!limit && value == UINT64_MAX) return "UINT64_MAX (keep all)";
    std::snprintf(buf, cap, "%llu", static_cast<unsigned long long>(value));
    return buf;
}

tf_status fail_conflict(const char *field, uint64_t asked, uint64_t has, bool limit, int ordinal,
                        uint64_t creator) __attribute__((cold, noinline));
tf_status fail_conflict(const char *field, uint64_t asked, uint64_t has, bool limit, int ordinal,
                        uint64_t creator) {
    char a[32], h[32];
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                   "%s %s differs from the %s of device %d's memory pool, which runtime %llu "
                   "created; the runtimes of a device share its pool: leave %s 0 to take the "
                   "pool's, or release the device's runtimes first",
                   field, describe(asked, limit, a, sizeof a), describe(has, limit, h, sizeof h),
                   ordinal, static_cast<unsigned long long>(creator), field);
}

tf_status check_agrees(const DevicePool &pool, const PoolRequest &r) {
    const PoolSettings &has = pool.settings();
    if (r.explicit_threshold && r.settings.release_threshold != has.release_threshold)
        return fail_conflict("memory_release_threshold", r.settings.release_threshold,
                             has.release_threshold, false, pool.ordinal(), pool.creator());
    if (r.explicit_limit && r.settings.reserved_limit != has.reserved_limit)
        return fail_conflict("memory_reserved_limit", r.settings.reserved_limit, has.reserved_limit,
                             true, pool.ordinal(), pool.creator());
    return TF_OK;
}

}  // namespace

tf_status acquire_device_pool(int ordinal, CUdevice device, const PoolRequest &request,
                              uint64_t identity, DevicePool **out) {
    Locked hold;
    if (!g_pools) g_pools = new Pools;
    auto it = g_pools->find(ordinal);
    if (it != g_pools->end()) {
        tf_status st = check_agrees(*it->second.pool, request);
        if (st != TF_OK) return st;
        ++it->second.references;
        *out = it->second.pool;
        return TF_OK;
    }
    std::unique_ptr<DevicePool> pool(new DevicePool(ordinal, device, request.settings, identity));
    g_pools->emplace(ordinal, Entry{pool.get(), 1});
    *out = pool.release();
    return TF_OK;
}

void release_device_pool(const DriverApi &api, DevicePool *pool, bool faulted, CUcontext context) {
    Locked hold;
    if (!g_pools) return;
    auto it = g_pools->find(pool->ordinal());
    if (it == g_pools->end() || it->second.pool != pool) return;  // a forked child's
    if (--it->second.references > 0) return;
    g_pools->erase(it);
    if (g_pools->empty()) {
        delete g_pools;
        g_pools = nullptr;
    }
    pool->release(api, faulted, context);
    delete pool;
}

}  // namespace tf
