// SPDX-License-Identifier: MIT OR Apache-2.0
#include "util/thread_sequence.h"

namespace tf {
std::atomic<uint32_t> g_next_thread{0};
}  // namespace tf
