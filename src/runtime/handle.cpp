// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/handle.h"

#include <pthread.h>

#include "util/error.h"
#include "util/fork_guard.h"

namespace tf {
namespace {

pthread_mutex_t g_quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
Handle *g_quarantine[kQuarantine];
size_t g_quarantine_next = 0;
pthread_once_t g_fork_hook_once = PTHREAD_ONCE_INIT;

// Fork child handler (util/fork_guard.h): a new quarantine lock.  A thread
// that held it does not exist here; at worst one dead shell of its update
// stays unfreed.
void quarantine_after_fork_child() { pthread_mutex_init(&g_quarantine_lock, nullptr); }

void add_fork_hook() { add_fork_child_hook(quarantine_after_fork_child); }

// When the library is unloaded (dlclose, or process exit) the quarantined
// shells are freed, so loading and unloading the library any number of times
// leaves nothing behind.  Memory only: no CUDA call runs at unload.
__attribute__((destructor)) void free_quarantine() {
    pthread_mutex_lock(&g_quarantine_lock);
    for (Handle *&h : g_quarantine) {
        if (h) h->delete_shell(h);
        h = nullptr;
    }
    pthread_mutex_unlock(&g_quarantine_lock);
}

}  // namespace

tf_status fail_handle(const HandleKind &kind, const Handle *h, uint64_t magic) {
    if (!h) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "%s is NULL", kind.what);
    if (magic == kDeadHandle)
        return TF_FAIL(TF_ERROR_INVALID_HANDLE, "%s %p was already released", kind.what,
                       static_cast<const void *>(h));
    return TF_FAIL(kind.foreign, "%p is not %s %s", static_cast<const void *>(h), kind.article,
                   kind.what);
}

bool drop_reference(Handle *h) {
    if (h->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    h->magic.store(kDeadHandle, std::memory_order_release);
    return true;
}

void quarantine(Handle *h) {
    pthread_once(&g_fork_hook_once, add_fork_hook);  // before the lock can first be held
    pthread_mutex_lock(&g_quarantine_lock);
    Handle *evicted = g_quarantine[g_quarantine_next];
    g_quarantine[g_quarantine_next] = h;
    g_quarantine_next = (g_quarantine_next + 1) % kQuarantine;
    pthread_mutex_unlock(&g_quarantine_lock);
    if (evicted) evicted->delete_shell(evicted);
}

}  // namespace tf
