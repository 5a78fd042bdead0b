#include "runtime/runtime_handle.h"

#include <pthread.h>

#include <cstddef>

#include "util/fork_guard.h"

namespace tf {
namespace {

// Dead shells wait here before being freed; once the ring is full the oldest
// is freed.  Bounded at kQuarantine shells (a few hundred KiB at most).
constexpr size_t kQuarantine = 4096;
pthread_mutex_t g_quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
tf_runtime *g_quarantine[kQuarantine];
size_t g_quarantine_next = 0;
pthread_once_t g_fork_hook_once = PTHREAD_ONCE_INIT;

// Fork child handler (util/fork_guard.h): a new quarantine lock.  A thread
// that held it does not exist here; at worst one dead shell of its update
// stays unfreed.
void quarantine_after_fork_child() { pthread_mutex_init(&g_quarantine_lock, nullptr); }

void add_fork_hook() { add_fork_child_hook(quarantine_after_fork_child); }

void quarantine(tf_runtime *rt) {
    pthread_once(&g_fork_hook_once, add_fork_hook);  // before the lock can first be held
    pthread_mutex_lock(&g_quarantine_lock);
    tf_runtime *evicted = g_quarantine[g_quarantine_next];
    g_quarantine[g_quarantine_next] = rt;
    g_quarantine_next = (g_quarantine_next + 1) % kQuarantine;
    pthread_mutex_unlock(&g_quarantine_lock);
    delete evicted;
}

// When the library is unloaded (dlclose, or process exit) the quarantined
// shells are freed, so loading and unloading the library any number of times
// leaves nothing behind.  Memory only: no CUDA call runs at unload.
__attribute__((destructor)) void free_quarantine() {
    pthread_mutex_lock(&g_quarantine_lock);
    for (tf_runtime *&rt : g_quarantine) {
        delete rt;
        rt = nullptr;
    }
    pthread_mutex_unlock(&g_quarantine_lock);
}

}  // namespace

tf_runtime *make_handle(std::shared_ptr<RuntimeState> state, int32_t bound_slot) {
    tf_runtime *rt = new tf_runtime;
    rt->refs.store(1, std::memory_order_relaxed);
    rt->bound_slot = bound_slot;
    rt->state = std::move(state);
    rt->magic.store(kLiveHandle, std::memory_order_release);
    return rt;
}

void release_handle(tf_runtime *rt) {
    if (rt->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    rt->magic.store(kDeadHandle, std::memory_order_release);
    std::shared_ptr<RuntimeState> state = std::move(rt->state);
    quarantine(rt);
    state.reset();  // the last reference tears the runtime down here
}

}  // namespace tf
