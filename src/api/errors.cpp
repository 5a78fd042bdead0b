// SPDX-License-Identifier: MIT OR Apache-2.0
// The calling thread's last error and the names of statuses:
// tf_last_error*, tf_clear_last_error, tf_error_info_init, tf_status_string.
#include <cstring>

#include "util/error.h"
#include "util/struct_io.h"

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
    tf::OperationScope operation("tf_last_error");  // not guarded: nothing here throws
    if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
    // Older callers may pass a shorter struct: copy only what they have.
    const size_t min_size = offsetof(tf_error_info, status) + sizeof(tf_status);
    tf_status st = tf::check_struct_size("out", out->struct_size, min_size, "tf_error_info_init");
    if (st != TF_OK) return st;
    const size_t n =
        out->struct_size < sizeof(tf_error_info) ? out->struct_size : sizeof(tf_error_info);
    const uint32_t caller_size = out->struct_size;
    std::memcpy(out, &tf::current_error(), n);
    out->struct_size = caller_size;
    return TF_OK;
}

TF_API const char *tf_status_string(tf_status status) {
    switch (status) {
        case TF_OK: return "success";
        case TF_ERROR_INVALID_ARGUMENT: return "invalid argument";
        case TF_ERROR_INVALID_HANDLE: return "invalid or released handle";
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
