// SPDX-License-Identifier: MIT OR Apache-2.0
// Public device discovery: tf_device_count, tf_device_info, tf_gpu_available.
#include <cstring>

#include "api/guard.h"
#include "driver/device_discovery.h"
#include "driver/driver_api.h"
#include "util/error.h"
#include "util/struct_io.h"
#include "util/unwind.h"

namespace {

// Minimum struct_size a caller's tf_device_properties must declare: up to ordinal.
constexpr size_t kDeviceInfoMinSize = offsetof(tf_device_properties, ordinal) + sizeof(int32_t);

// Whether a runtime on device 0 can be created, given a stream and
// synchronized: the whole path a first real call takes.
int32_t probe_gpu() {
    int32_t count = 0;
    if (tf_device_count(&count) != TF_OK || count < 1) return 0;
    tf_runtime *rt = nullptr;
    if (tf_runtime_new(0, &rt) != TF_OK) return 0;
    void *stream = nullptr;
    int32_t ok = tf_runtime_stream(rt, &stream) == TF_OK && tf_runtime_sync(rt) == TF_OK;
    tf_runtime_release(rt);
    return ok;
}

}  // namespace

extern "C" {

TF_API void tf_device_properties_init(tf_device_properties *info, size_t struct_size) {
    tf::init_sized(info, struct_size, tf_device_properties{});
}

TF_API tf_status tf_device_count(int32_t *out_count) {
    static const char op[] = "tf_device_count";
    return tf::guarded(op, [&]() -> tf_status {
        if (!out_count) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_count is NULL");
        tf::ErrorSnapshot before;
        tf::save_error(&before);
        const tf::DriverApi *api = tf::init_driver();
        if (!api) {
            // A driver without devices refuses cuInit; counting them is not
            // an error, and leaves the caller's record alone.
            if (tf::current_error().status != TF_ERROR_NO_DEVICE) return tf::current_error().status;
            tf::restore_error(before);
            *out_count = 0;
            return TF_OK;
        }
        return tf::count_devices(*api, out_count);
    });
}

TF_API tf_status tf_device_info(int32_t ordinal, tf_device_properties *out) {
    static const char op[] = "tf_device_info";
    return tf::guarded(op, [&]() -> tf_status {
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
        tf_status st = tf::check_struct_size("out", out->struct_size, kDeviceInfoMinSize,
                                             "tf_device_properties_init");
        if (st != TF_OK) return st;
        const tf::DriverApi *api = tf::init_driver();
        if (!api) return tf::current_error().status;
        CUdevice device = 0;
        st = tf::lookup_device(*api, ordinal, &device);
        if (st != TF_OK) return st;
        tf_device_properties info;
        if ((st = tf::describe_device(*api, ordinal, device, &info)) != TF_OK) return st;
        tf::copy_out_sized(out, info);
        return TF_OK;
    });
}

TF_API int32_t tf_gpu_available(void) {
    tf::KeepLastError keep;  // a failed probe answers 0, and is nobody's error
    try {
        return probe_gpu();
    } catch (...) {
        if (tf::foreign_unwinding()) throw;  // cancellation keeps unwinding
        return 0;
    }
}

}  // extern "C"
