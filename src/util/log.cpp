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

#include "api/guard.h"
#include "util/error.h"
#include "util/fork_guard.h"
#include "util/unwind.h"

namespace tf {
namespace {

// Constant-initialised: no static constructor or destructor runs.
pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
tf_log_fn g_fn = nullptr;
void *g_user_data = nullptr;
thread_local bool t_in_callback = false;

}  // namespace

void log_after_fork_child() {
    pthread_rwlock_init(&g_lock, nullptr);
    if (t_in_callback) pthread_rwlock_rdlock(&g_lock);  // fork() inside a log callback
}

void log(int32_t level, const char *fmt, ...) {
    install_fork_handler();  // before the log lock can first be held
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

}  // namespace tf

extern "C" TF_API tf_status tf_set_log_callback(tf_log_fn fn, void *user_data) {
    static const char op[] = "tf_set_log_callback";
    return tf::guarded(op, [&]() -> tf_status {
        if (tf::t_in_callback)
            return TF_FAIL(TF_ERROR_RUNTIME_STATE, op,
                           "called from inside a log callback, which would deadlock");
        tf::install_fork_handler();  // before the log lock can first be held
        pthread_rwlock_wrlock(&tf::g_lock);
        tf::g_fn = fn;
        tf::g_user_data = user_data;
        pthread_rwlock_unlock(&tf::g_lock);
        return TF_OK;
    });
}
