// Warnings that have no caller to return to: restore and teardown failures.
#pragma once

#include <cstdint>

#include "tenferro_gpu.h"

namespace tf {

// Formats one line and hands it to the installed log callback, or to stderr
// with the "tenferro-gpu: " prefix.  Never fails, never throws.
void log(int32_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Fork child handler (util/fork_guard.h): a new log lock, held shared again if
// this thread forked from inside a log callback.
void log_after_fork_child();

}  // namespace tf
