// Thread-local last error and the public accessors.
#include "util/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "util/struct_io.h"


namespace tf {
namespace {

// INVARIANT: trivially destructible, so a thread's exit runs no code of this
// library and dlclose of the library is never blocked by TLS destructors.
thread_local tf_error_info t_error;

void copy_name(char *dst, const char *src) {
    std::snprintf(dst, TF_ERROR_NAME_CAPACITY, "%s", src ? src : "");
}

}  // namespace

tf_status fail(tf_status status, const char *op, const char *call, int32_t domain,
               int32_t code, const char *fmt, ...) {
    tf_error_info &e = t_error;
    e.struct_size = sizeof(tf_error_info);
    e.status = status;
    e.code_domain = domain;
    e.code = code;
    copy_name(e.operation, op);
    copy_name(e.call, call);
    int prefix = std::snprintf(e.message, sizeof e.message, "%s: ", op ? op : "");
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

extern "C" {

TF_API const char *tf_last_error_message(void) { return tf::current_error().message; }
TF_API const char *tf_last_error_operation(void) { return tf::current_error().operation; }
TF_API const char *tf_last_error_call(void) { return tf::current_error().call; }
TF_API int32_t tf_last_error_code(void) { return tf::current_error().code; }
TF_API int32_t tf_last_error_code_domain(void) { return tf::current_error().code_domain; }
TF_API tf_status tf_last_error_status(void) { return tf::current_error().status; }
TF_API void tf_clear_last_error(void) { tf::restore_error(tf::ErrorSnapshot{}); }

TF_API void tf_error_info_init(tf_error_info *info, size_t struct_size) {
    tf::init_sized(info, struct_size, tf_error_info{});
}

TF_API tf_status tf_last_error(tf_error_info *out) {
    static const char op[] = "tf_last_error";
    if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "out is NULL");
    // Older callers may pass a shorter struct: copy only what they have.
    const size_t min_size = offsetof(tf_error_info, status) + sizeof(tf_status);
    tf_status st = tf::check_struct_size(op, "out", out->struct_size, min_size,
                                         "tf_error_info_init");
    if (st != TF_OK) return st;
    const size_t n = out->struct_size < sizeof(tf_error_info) ? out->struct_size
                                                              : sizeof(tf_error_info);
    const uint32_t caller_size = out->struct_size;
    std::memcpy(out, &tf::current_error(), n);
    out->struct_size = caller_size;
    return TF_OK;
}

TF_API const char *tf_status_string(tf_status status) {
    switch (status) {
        case TF_OK: return "success";
        case TF_ERROR_INVALID_ARGUMENT: return "invalid argument";
        case TF_ERROR_INVALID_HANDLE: return "invalid or released runtime handle";
        case TF_ERROR_DRIVER_NOT_FOUND: return "CUDA driver not found";
        case TF_ERROR_DRIVER_STUB: return "CUDA driver is the toolkit stub";
        case TF_ERROR_NO_DEVICE: return "no CUDA device";
        case TF_ERROR_DEVICE_UNAVAILABLE: return "CUDA device unavailable";
        case TF_ERROR_DRIVER_TOO_OLD: return "CUDA driver too old";
        case TF_ERROR_CUDA: return "CUDA driver call failed";
        case TF_ERROR_NOT_SUPPORTED: return "not supported";
        case TF_ERROR_LIBRARY_NOT_FOUND: return "library not found";
        case TF_ERROR_PROVIDER: return "vendor library call failed";
        case TF_ERROR_CALLBACK: return "callback failed";
        case TF_ERROR_OUT_OF_MEMORY: return "out of memory";
        case TF_ERROR_RUNTIME_STATE: return "runtime state forbids the call";
        case TF_ERROR_DEVICE_FAULT: return "device fault: context unusable";
        case TF_ERROR_COMPILE: return "compilation failed";
        case TF_ERROR_INTERNAL: return "internal error";
        default: return "unknown status";
    }
}

}  // extern "C"
