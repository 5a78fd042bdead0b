// SPDX-License-Identifier: MIT OR Apache-2.0
// The thread-local last error.
#include "util/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace tf {
namespace {

// INVARIANT: trivially destructible, so a thread's exit runs no code of this
// library and dlclose of the library is never blocked by TLS destructors.
thread_local tf_error_info t_error;

void copy_name(char *dst, const char *src) {
    std::snprintf(dst, TF_ERROR_NAME_CAPACITY, "%s", src ? src : "");
}

}  // namespace

tf_status fail(tf_status status, const char *call, int32_t domain, int32_t code, const char *fmt,
               ...) {
    const char *op = current_operation();
    tf_error_info &e = t_error;
    e.struct_size = sizeof(tf_error_info);
    e.status = status;
    e.code_domain = domain;
    e.code = code;
    copy_name(e.operation, op);
    copy_name(e.call, call);
    int prefix = std::snprintf(e.message, sizeof e.message, "%s: ", op);
    if (prefix < 0 || static_cast<size_t>(prefix) >= sizeof e.message) return status;
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(e.message + prefix, sizeof e.message - prefix, fmt, args);
    va_end(args);
    return status;
}

void save_error(ErrorSnapshot *out) { out->info = t_error; }
void restore_error(const ErrorSnapshot &saved) { t_error = saved.info; }

const tf_error_info &current_error() { return t_error; }

}  // namespace tf
