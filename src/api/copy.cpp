// SPDX-License-Identifier: MIT OR Apache-2.0
// Public host-to-device and device copies: tf_upload, tf_copy.
#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "transfer/device_range.h"
#include "transfer/staged_upload.h"
#include "util/defer_cancellation.h"

extern "C" {

TF_API tf_status tf_upload(tf_runtime *rt, const void *src, uint64_t dst, size_t len) {
    tf::DeferCancellation no_cancel;  // as tf_download
    static const char op[] = "tf_upload";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!src) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "src is NULL");
        const tf::DriverApi &api = state.api();
        tf::CallFrame frame(rt);
        tf::HostMemory host_kind = tf::HostMemory::pageable;
        tf_status st = frame.enter();
        if (st == TF_OK)
            st = frame.refuse_capture(
                "this call waits for the device or frees its source on return, which a graph's "
                "launches could not repeat (use tf_upload_async)");
        if (st == TF_OK)
            st = tf::check_host_transfer(frame, "dst", dst, "src", src, len, &host_kind);
        if (st != TF_OK) return st;
        if (host_kind == tf::HostMemory::pageable && len > tf::kStagedUploadAbove)
            return tf::upload_staged(frame, src, dst, len);
        st = TF_CU(api, cuMemcpyHtoDAsync, dst, src, len, frame.stream());
        // The driver stages pageable memory before it returns; the device
        // reads page-locked memory itself, so wait until it has.
        if (st == TF_OK && host_kind == tf::HostMemory::page_locked)
            st = TF_CU(api, cuStreamSynchronize, frame.stream());
        return tf::finish_host_copy(frame, host_kind, src, len, st);
    });
}

TF_API tf_status tf_copy(tf_runtime *rt, uint64_t src, uint64_t dst, size_t len) {
    static const char op[] = "tf_copy";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        tf_status st = tf::check_no_overlap(src, dst, len);
        if (st != TF_OK) return st;
        tf::CallFrame frame(rt);
        st = frame.enter();
        if (st == TF_OK) st = tf::check_device_range(state, "src", src, len);
        if (st == TF_OK) st = tf::check_device_range(state, "dst", dst, len);
        if (st != TF_OK) return st;
        return TF_CU(state.api(), cuMemcpyDtoDAsync, dst, src, len, frame.stream());
    });
}

}  // extern "C"
