/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What a fork() does to this library, without a system call per call.
//
// One pthread_atfork child handler, installed once (pthread_once) before
// the first runtime is created and before any process-wide lock of the
// library can first be held; no static constructor does it.  In the child
// it:
//  - bumps a process-wide generation; a runtime remembers the generation it
//    was created in, and a mismatch means this process is a child of the one
//    that created it, where CUDA cannot be used (TF_ERROR_RUNTIME_STATE);
//  - runs the child hooks of the process-wide locks (the log lock, the
//    handle quarantine lock, the loads of the driver, cuBLAS and NVRTC),
//    each added by the lock's owner before the lock is first held: they
//    re-initialise the locks, because the threads that held them do not
//    exist in the child, so nothing in the child ever waits for them.  A
//    load that was in flight is lost: the child's calls that need it
//    answer TF_ERROR_RUNTIME_STATE.
// The hooks live here so that each layer adds its own and this file names
// none of them.  There is no prepare handler: taking the log lock before
// fork() would block fork() behind a log callback running on another
// thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace tf {

// Hidden: read by every call (RuntimeState::check_usable), so no GOT load.
extern std::atomic<uint32_t> g_fork_generation __attribute__((visibility("hidden")));

// Installs the handler once per process; call before reading the generation
// for a new runtime.  Safe from any thread.
void install_fork_handler();

// Installs the handler and adds `hook` to what it runs in the child, after
// the generation is bumped.  Call once per hook (under the owner's
// pthread_once), before the lock the hook re-initialises can first be held.
// At most kForkChildHooks hooks: a further one is refused (false).
constexpr int kForkChildHooks = 8;
bool add_fork_child_hook(void (*hook)());

inline uint32_t fork_generation() { return g_fork_generation.load(std::memory_order_relaxed); }

}  // namespace tf
