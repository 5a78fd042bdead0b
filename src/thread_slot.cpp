#include "thread_slot.h"

namespace tf {
std::atomic<uint32_t> g_next_thread{0};
}  // namespace tf
