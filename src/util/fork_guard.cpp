// SPDX-License-Identifier: MIT OR Apache-2.0
#include "util/fork_guard.h"

#include <pthread.h>

namespace tf {

std::atomic<uint32_t> g_fork_generation{0};

namespace {

pthread_once_t g_once = PTHREAD_ONCE_INIT;
// Slots are claimed with the count and filled after; the child skips a slot
// whose hook a thread that does not exist there never stored.
std::atomic<void (*)()> g_hooks[kForkChildHooks];
std::atomic<int> g_hook_count{0};

void on_fork_child() {
    g_fork_generation.fetch_add(1, std::memory_order_relaxed);
    const int n = g_hook_count.load(std::memory_order_acquire);
    for (int i = 0; i < n && i < kForkChildHooks; ++i)
        if (void (*hook)() = g_hooks[i].load(std::memory_order_acquire)) hook();
}

// glibc removes handlers registered by a shared object when it is unloaded.
void install() { pthread_atfork(nullptr, nullptr, on_fork_child); }

}  // namespace

void install_fork_handler() { pthread_once(&g_once, install); }

bool add_fork_child_hook(void (*hook)()) {
    install_fork_handler();
    const int i = g_hook_count.fetch_add(1, std::memory_order_acq_rel);
    if (i >= kForkChildHooks) return false;
    g_hooks[i].store(hook, std::memory_order_release);
    return true;
}

}  // namespace tf
