// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/orphan_blocks.h"

#include <pthread.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <new>

#include "driver/context_scope.h"
#include "driver/cuda_status.h"
#include "util/error.h"
#include "util/fork_guard.h"
#include "util/log.h"

namespace tf {
namespace {

// The blocks of one released runtime and what keeps them mapped.
struct OrphanGroup {
    OrphanGroup(const DriverApi &api, PrimaryContextRetain retain, bool idle)
        : api(&api), retain(std::move(retain)), idle(idle) {}
    const DriverApi *api;
    PrimaryContextRetain retain;
    bool idle;
    uint32_t generation = fork_generation();
    pid_t pid = getpid();
    std::map<uintptr_t, size_t> blocks;  // base -> capacity
};

// Constant-initialised; the groups are allocated at the first adoption and
// never freed, so no static destructor runs.
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
std::vector<OrphanGroup *> *g_groups = nullptr;
pthread_once_t g_fork_hook_once = PTHREAD_ONCE_INIT;

// Fork child handler (util/fork_guard.h): a new lock; the groups stay, each
// refusing its frees here.
void orphans_after_fork_child() { pthread_mutex_init(&g_lock, nullptr); }
void add_fork_hook() { add_fork_child_hook(orphans_after_fork_child); }

class Locked {
public:
    Locked() {
        pthread_once(&g_fork_hook_once, add_fork_hook);  // before the lock can first be held
        pthread_mutex_lock(&g_lock);
    }
    ~Locked() { pthread_mutex_unlock(&g_lock); }
    Locked(const Locked &) = delete;
    Locked &operator=(const Locked &) = delete;
};

// The group holding the block that starts at p, under the lock.
OrphanGroup *find_locked(uintptr_t p) {
    if (!g_groups) return nullptr;
    for (OrphanGroup *g : *g_groups)
        if (g->blocks.count(p)) return g;
    return nullptr;
}

void drop_group_locked(OrphanGroup *g) {
    for (auto it = g_groups->begin(); it != g_groups->end(); ++it)
        if (*it == g) {
            g_groups->erase(it);
            return;
        }
}

// cuMemFreeHost of a block no stream can still use, with the context it
// lives in current.
tf_status free_idle_block(const OrphanGroup &g, void *ptr) {
    ContextScope scope;
    tf_status st = scope.enter(*g.api, g.retain.context());
    if (st == TF_OK) st = TF_CU(*g.api, cuMemFreeHost, ptr);
    return st;
}

}  // namespace

void adopt_orphan_blocks(const DriverApi &api, PrimaryContextRetain retain, bool idle, bool quiet,
                         const std::vector<OrphanBlock> &blocks) noexcept {
    uint64_t bytes = 0;
    for (const OrphanBlock &b : blocks) bytes += b.capacity;
    if (!quiet)
        log(TF_LOG_WARNING,
            "tf_runtime_release: %llu tf_host_alloc blocks (%llu bytes) were not freed; they stay "
            "allocated and mapped, and the device's primary context retained, until each is freed "
            "with tf_host_free(NULL, ptr)%s",
            static_cast<unsigned long long>(blocks.size()), static_cast<unsigned long long>(bytes),
            idle ? ""
                 : " (the device may still use them: that free only forgets them, and the "
                   "context frees them when the last goes)");
    try {
        std::unique_ptr<OrphanGroup> group(new OrphanGroup(api, std::move(retain), idle));
        for (const OrphanBlock &b : blocks) group->blocks.emplace(b.base, b.capacity);
        Locked hold;
        if (!g_groups) g_groups = new std::vector<OrphanGroup *>;
        g_groups->push_back(group.get());
        group.release();
    } catch (const std::bad_alloc &) {
        // The retain went with the group that was never made: released, it
        // could end the context.  Keep it, and the blocks, until exit.
        log(TF_LOG_ERROR,
            "tf_runtime_release: out of host memory: the blocks and the primary "
            "context stay until the process exits");
    }
}

tf_status free_orphan_block(void *ptr) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    std::unique_ptr<OrphanGroup> last;
    tf_status st = TF_OK;
    {
        Locked hold;
        OrphanGroup *g = find_locked(p);
        if (!g)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                           "runtime handle is NULL, and ptr %p is not the start of a "
                           "tf_host_alloc block whose runtime was released (a block of a live "
                           "runtime is freed through it)",
                           ptr);
        if (g->generation != fork_generation())
            return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                           "ptr %p is a page-locked block of process %d; this process (%d) was "
                           "forked from it, and CUDA memory cannot be used after a fork",
                           ptr, static_cast<int>(g->pid), static_cast<int>(getpid()));
        g->blocks.erase(p);
        // Under the lock: the last free releases the context, which must
        // not end while another thread's cuMemFreeHost runs in it.
        if (g->idle) st = free_idle_block(*g, ptr);
        if (g->blocks.empty()) {
            drop_group_locked(g);
            last.reset(g);
        }
    }
    return st;  // `last` goes now: its retain is released
}

bool is_orphan_block(const void *ptr) {
    Locked hold;
    return find_locked(reinterpret_cast<uintptr_t>(ptr)) != nullptr;
}

}  // namespace tf
