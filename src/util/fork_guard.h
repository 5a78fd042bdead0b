// What a fork() does to this library, without a system call per call.
//
// One pthread_atfork child handler, installed once (pthread_once) on every
// path that first takes a process-wide lock of the library, so before any
// such lock can be held at a fork; no static constructor does it.  In the
// child it:
//  - bumps a process-wide generation; a runtime remembers the generation it
//    was created in, and a mismatch means this process is a child of the one
//    that created it, where CUDA cannot be used (TF_ERROR_RUNTIME_STATE);
//  - re-initialises every process-wide lock (the log lock, the handle
//    quarantine lock, the loads of the driver, cuBLAS and NVRTC): the
//    threads that held them do not exist in the child, so nothing in the
//    child ever waits for them.  A load that was in flight is lost: the
//    child's calls that need it answer TF_ERROR_RUNTIME_STATE.
// There is no prepare handler: taking the log lock before fork() would
// block fork() behind a log callback running on another thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace tf {

extern std::atomic<uint32_t> g_fork_generation;

// Installs the handler once per process; call before taking a process-wide
// lock, and before reading the generation for a new runtime.  Safe from any
// thread.
void install_fork_handler();

inline uint32_t fork_generation() { return g_fork_generation.load(std::memory_order_relaxed); }

}  // namespace tf
