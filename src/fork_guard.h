// Detects use of a runtime in a forked child without a system call per call.
//
// A pthread_atfork child handler bumps a process-wide generation; a runtime
// remembers the generation it was created in.  A mismatch means this process
// is a child of the one that created the runtime, where CUDA cannot be used.
#pragma once

#include <atomic>
#include <cstdint>

namespace tf {

extern std::atomic<uint32_t> g_fork_generation;

// Installs the handler once per process; call before reading the generation
// for a new runtime.  Safe from any thread.
void install_fork_handler();

inline uint32_t fork_generation() { return g_fork_generation.load(std::memory_order_relaxed); }

}  // namespace tf
