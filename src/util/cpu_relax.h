/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// cpu_relax(): the hint a spin-wait loop gives the CPU between two polls
// (the copy pool's workers, the scalar read's flag).
#pragma once

#include <thread>

namespace tf {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#else
    std::this_thread::yield();
#endif
}

}  // namespace tf
