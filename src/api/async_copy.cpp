// Public asynchronous copies between device memory and page-locked host
// memory the runtime tracks: tf_download_async, tf_upload_async.
//
// The host range is looked up in the runtime's pool under its reader lock,
// which stays held until the copy is queued, so a tf_host_free racing the
// call is ordered after the copy and waits for it.
#include "cuda_status.h"
#include "device_range.h"
#include "runtime_call.h"
#include "transfer_common.h"

extern "C" {

TF_API tf_status tf_download_async(tf_runtime *rt, uint64_t src, void *dst, size_t len) {
    static const char op[] = "tf_download_async";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!dst) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "dst is NULL");
        tf::ContextScope scope;
        int slot = 0;
        CUstream stream = nullptr;
        tf_status st = tf::enter_slot_stream(op, rt, scope, &slot, &stream);
        if (st == TF_OK) st = tf::check_device_range(state, op, "src", src, len);
        tf::HostPool::Use use;
        if (st == TF_OK) st = state.host_pool().begin_use(op, "dst", dst, len, slot, stream, &use);
        if (st != TF_OK) return st;
        return TF_CU(state.api(), op, cuMemcpyDtoHAsync, dst, src, len, stream);
    });
}

TF_API tf_status tf_upload_async(tf_runtime *rt, const void *src, uint64_t dst, size_t len) {
    static const char op[] = "tf_upload_async";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!src) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "src is NULL");
        tf::ContextScope scope;
        int slot = 0;
        CUstream stream = nullptr;
        tf_status st = tf::enter_slot_stream(op, rt, scope, &slot, &stream);
        if (st == TF_OK) st = tf::check_device_range(state, op, "dst", dst, len);
        tf::HostPool::Use use;
        if (st == TF_OK) st = state.host_pool().begin_use(op, "src", src, len, slot, stream, &use);
        if (st != TF_OK) return st;
        return TF_CU(state.api(), op, cuMemcpyHtoDAsync, dst, src, len, stream);
    });
}

}  // extern "C"
