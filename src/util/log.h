/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Warnings that have no caller to return to: restore and teardown failures.
#pragma once

#include <cstdint>

#include "tenferro_gpu.h"

namespace tf {

// Formats one line and hands it to the installed log callback, or to stderr
// with the "tenferro-gpu: " prefix.  Never fails, never throws.
void log(int32_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Installs the callback lines go to (NULL: stderr); once it returns, the
// previous callback is never called again.  False, changing nothing, when
// called from inside a log callback, where it would deadlock.
bool set_log_callback(tf_log_fn fn, void *user_data);

}  // namespace tf
