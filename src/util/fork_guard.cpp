#include "util/fork_guard.h"

#include <pthread.h>

#include "driver/load_once.h"
#include "runtime/runtime_handle.h"
#include "util/log.h"

namespace tf {

std::atomic<uint32_t> g_fork_generation{0};

namespace {
pthread_once_t g_once = PTHREAD_ONCE_INIT;

void on_fork_child() {
    g_fork_generation.fetch_add(1, std::memory_order_relaxed);
    log_after_fork_child();
    quarantine_after_fork_child();
    loads_after_fork_child();
}

// glibc removes handlers registered by a shared object when it is unloaded.
void install() { pthread_atfork(nullptr, nullptr, on_fork_child); }
}  // namespace

void install_fork_handler() { pthread_once(&g_once, install); }

}  // namespace tf
