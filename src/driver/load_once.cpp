// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/load_once.h"

#include "util/error.h"
#include "util/fork_guard.h"

namespace tf {
namespace {

LoadOnce g_loads[static_cast<int>(Loaded::count)];
pthread_once_t g_fork_hook_once = PTHREAD_ONCE_INIT;

// Fork child handler (util/fork_guard.h): every load's lock is new.
void loads_after_fork_child() {
    for (LoadOnce &once : g_loads) once.after_fork_child();
}

void add_fork_hook() { add_fork_child_hook(loads_after_fork_child); }

// Unlocks on every exit; a load that throws leaves the phase idle, so the
// next call tries again.
struct Unlock {
    pthread_mutex_t *lock;
    ~Unlock() { pthread_mutex_unlock(lock); }
};

}  // namespace

bool LoadOnce::run_slow(void (*load)(void *), void *arg) {
    pthread_once(&g_fork_hook_once, add_fork_hook);  // before the lock can first be held
    pthread_mutex_lock(&lock_);
    Unlock unlock{&lock_};
    int phase = phase_.load(std::memory_order_relaxed);
    if (phase == kIdle) {
        phase_.store(kRunning, std::memory_order_relaxed);
        try {
            load(arg);
        } catch (...) {
            phase_.store(kIdle, std::memory_order_relaxed);
            throw;
        }
        phase = kDone;
        phase_.store(kDone, std::memory_order_release);
    }
    return phase == kDone;
}

void LoadOnce::after_fork_child() {
    // Only the thread that called fork() exists here: a load another
    // thread was running never finishes, and whoever held the lock is gone.
    if (phase_.load(std::memory_order_relaxed) == kRunning)
        phase_.store(kLost, std::memory_order_relaxed);
    pthread_mutex_init(&lock_, nullptr);
}

LoadOnce &load_once(Loaded which) { return g_loads[static_cast<int>(which)]; }

tf_status fail_lost_load(const char *what) {
    return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                   "%s was being loaded by another thread when this process was forked; that "
                   "load never finishes in this process (load it before fork(), or only in the "
                   "child)",
                   what);
}

}  // namespace tf
