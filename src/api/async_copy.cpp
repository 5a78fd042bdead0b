// SPDX-License-Identifier: MIT OR Apache-2.0
// Public asynchronous copies between device memory and page-locked host
// memory the runtime tracks: tf_download_async, tf_upload_async.
//
// The host range is looked up in the runtime's pool under its reader lock,
// which stays held until the copy is queued, so a tf_host_free racing the
// call is ordered after the copy and waits for it.
#include "driver/cuda_status.h"
#include "transfer/device_range.h"
#include "api/guard.h"
#include "runtime/call_frame.h"
#include "runtime/graph_capture.h"

extern "C" {

TF_API tf_status tf_download_async(tf_runtime *rt, uint64_t src, void *dst, size_t len) {
    static const char op[] = "tf_download_async";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!dst) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "dst is NULL");
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        if (st == TF_OK) st = tf::check_device_range(state, "src", src, len);
        tf::HostPool::Use use;
        if (st == TF_OK) st = tf::use_host_range(frame, "dst", dst, len, &use);
        if (st != TF_OK) return st;
        return TF_CU(state.api(), cuMemcpyDtoHAsync, dst, src, len, frame.stream());
    });
}

TF_API tf_status tf_upload_async(tf_runtime *rt, const void *src, uint64_t dst, size_t len) {
    static const char op[] = "tf_upload_async";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!src) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "src is NULL");
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        if (st == TF_OK) st = tf::check_device_range(state, "dst", dst, len);
        tf::HostPool::Use use;
        if (st == TF_OK) st = tf::use_host_range(frame, "src", src, len, &use);
        if (st != TF_OK) return st;
        return TF_CU(state.api(), cuMemcpyHtoDAsync, dst, src, len, frame.stream());
    });
}

}  // extern "C"
