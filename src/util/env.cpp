// SPDX-License-Identifier: MIT OR Apache-2.0
#include "util/env.h"

#include <cstdlib>

namespace tf {

const char *library_override(const char *name, bool *rejected) {
    *rejected = false;
    const char *value = secure_getenv(name);
    if (!value || !*value) return nullptr;
    if (value[0] != '/') {
        // A relative path would be resolved against the working directory,
        // which an attacker may control: only absolute paths are honoured.
        *rejected = true;
        return nullptr;
    }
    return value;
}

}  // namespace tf
