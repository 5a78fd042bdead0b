// SPDX-License-Identifier: MIT OR Apache-2.0
// Log callback dispatch.
//
// INVARIANT: once tf_set_log_callback returns, the previous callback is never
// called again.  Calls hold a shared lock while they run the callback and the
// setter takes it exclusively, so the setter waits for calls in progress.  A
// callback that calls the setter would deadlock; a thread-local flag turns
// that into TF_ERROR_RUNTIME_STATE.  A forked child gets a new lock
// (util/fork_guard.h): the callbacks that held it run on threads it lacks.
#include "util/log.h"

#include <pthread.h>

#include <cstdarg>
#include <cstdio>

#include "util/fork_guard.h"
#include "util/unwind.h"

namespace tf {
namespace {

// Constant-initialised: no static constructor or destructor runs.
pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
tf_log_fn g_fn = nullptr;
void *g_user_data = nullptr;
thread_local bool t_in_callback = false;
pthread_once_t g_fork_hook_once = PTHREAD_ONCE_INIT;

// Fork child handler (util/fork_guard.h): a new log lock, held shared again
// if this thread forked from inside a log callback.
void log_after_fork_child() {
    pthread_rwlock_init(&g_lock, nullptr);
    if (t_in_callback) pthread_rwlock_rdlock(&g_lock);  // fork() inside a log callback
}

void add_fork_hook() { add_fork_child_hook(log_after_fork_child); }

// Before the log lock can first be held.
void guard_lock_against_fork() { pthread_once(&g_fork_hook_once, add_fork_hook); }

}  // namespace

void log(int32_t level, const char *fmt, ...) {
    guard_lock_against_fork();
    char line[1024];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(line, sizeof line, fmt, args);
    va_end(args);

    pthread_rwlock_rdlock(&g_lock);
    if (g_fn) {
        t_in_callback = true;
        try {
            g_fn(level, line, g_user_data);
        } catch (...) {
            if (foreign_unwinding()) {  // cancellation keeps unwinding
                t_in_callback = false;
                pthread_rwlock_unlock(&g_lock);
                throw;
            }
            // A log callback that throws loses its message, nothing else.
        }
        t_in_callback = false;
    } else {
        std::fprintf(stderr, "tenferro-gpu: %s\n", line);
    }
    pthread_rwlock_unlock(&g_lock);
}

bool set_log_callback(tf_log_fn fn, void *user_data) {
    if (t_in_callback) return false;
    guard_lock_against_fork();
    pthread_rwlock_wrlock(&g_lock);
    g_fn = fn;
    g_user_data = user_data;
    pthread_rwlock_unlock(&g_lock);
    return true;
}

}  // namespace tf
