/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Environment overrides for where CUDA libraries are loaded from.
#pragma once

namespace tf {

// The value of `name` when it is set, non-empty, the process is not running
// set-user-ID (secure_getenv), and it is an absolute path; NULL otherwise.
// `*rejected` is set when a value was present but not absolute, so the
// caller can say why it was ignored.
const char *library_override(const char *name, bool *rejected);

}  // namespace tf
