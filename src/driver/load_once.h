/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// One-time loading of a library (the CUDA driver, cuBLAS, cuBLASLt, NVRTC) that a
// fork() cannot leave stuck.
//
// A function-local static would do the once, but its guard waits forever in
// a child forked while another thread ran the load: that thread does not
// exist in the child.  Here the load runs under a plain mutex that the fork
// child handler re-initialises (util/fork_guard.h), and a load that was in flight
// at the fork is marked lost: the child's calls answer TF_ERROR_RUNTIME_STATE
// instead of waiting for it.
//
// INVARIANT: constant-initialised (no static constructor); the fast path,
// once loaded, is one acquire load.
#pragma once

#include <pthread.h>

#include <atomic>

#include "tenferro_gpu.h"

namespace tf {

class LoadOnce {
public:
    constexpr LoadOnce() = default;
    LoadOnce(const LoadOnce &) = delete;
    LoadOnce &operator=(const LoadOnce &) = delete;

    // Runs `load` the first time; later calls, and calls racing with the
    // first, return once it finished.  False when this process was forked
    // while another thread ran the load: it never finishes here.
    template <class Load>
    bool run(Load &&load) {
        const int phase = phase_.load(std::memory_order_acquire);
        if (phase == kDone) return true;
        if (phase == kLost) return false;
        return run_slow(&call<Load>, &load);
    }

    // Fork child handler: the lock is new, a load in flight is lost.
    void after_fork_child();

private:
    static constexpr int kIdle = 0, kRunning = 1, kDone = 2, kLost = 3;

    template <class Load>
    static void call(void *load) {
        (*static_cast<Load *>(load))();
    }
    bool run_slow(void (*load)(void *), void *arg);

    std::atomic<int> phase_{kIdle};
    pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER;
};

// The process-wide loads, re-initialised together in a forked child.
enum class Loaded { driver, cublas, cublaslt, nvrtc, count };
LoadOnce &load_once(Loaded which);

// Records TF_ERROR_RUNTIME_STATE: `what` ("the CUDA driver") was
// being loaded by another thread when this process was forked.
tf_status fail_lost_load(const char *what);

}  // namespace tf
