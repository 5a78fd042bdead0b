// SPDX-License-Identifier: MIT OR Apache-2.0
// Public downloads: tf_download_scalar (the hot path) and tf_download.
#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/graph_capture.h"
#include "transfer/device_range.h"
#include "transfer/scalar_read.h"
#include "transfer/staged_download.h"
#include "util/defer_cancellation.h"

namespace {

tf_status fail_scalar_len(size_t len) __attribute__((cold, noinline));
tf_status fail_scalar_len(size_t len) {
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                   "len %zu is over TF_SCALAR_DOWNLOAD_MAX_BYTES (%d); use tf_download", len,
                   TF_SCALAR_DOWNLOAD_MAX_BYTES);
}

}  // namespace

extern "C" {

TF_API tf_status tf_download_scalar(tf_runtime *rt, uint64_t src, void *out, size_t len) {
    static const char op[] = "tf_download_scalar";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
        if (len > TF_SCALAR_DOWNLOAD_MAX_BYTES) return fail_scalar_len(len);
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        // The library's captures only: a driver query would cost the hot
        // path more than its goal allows (NOTE [capture]).
        if (st == TF_OK)
            st = tf::refuse_own_capture(state, frame.slot(), "this call waits for the device");
        if (st == TF_OK) st = tf::check_device_range(state, "src", src, len);
        if (st != TF_OK) return st;
        return tf::read_scalar(frame, src, out, len, tf::ScalarReadPlan());
    });
}

TF_API tf_status tf_download(tf_runtime *rt, uint64_t src, void *dst, size_t len) {
    // A pthread_cancel acts after the call: a log line or a driver call may
    // be a cancellation point anywhere in it, and the frame's destructor,
    // which may log, must not unwind (the header's promise).
    tf::DeferCancellation no_cancel;
    static const char op[] = "tf_download";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!dst) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "dst is NULL");
        const tf::DriverApi &api = state.api();
        tf::CallFrame frame(rt);
        tf::HostMemory host_kind = tf::HostMemory::pageable;
        tf_status st = frame.enter();
        if (st == TF_OK) st = frame.refuse_capture("this call waits for the device");
        if (st == TF_OK)
            st = tf::check_host_transfer(frame, "src", src, "dst", dst, len, &host_kind);
        if (st != TF_OK) return st;
        if (host_kind == tf::HostMemory::pageable && len > tf::kStagedDownloadAbove)
            return tf::download_staged(frame, src, dst, len);
        // Page-locked memory the device writes directly; small pageable
        // copies go through the driver's own staging.
        st = TF_CU(api, cuMemcpyDtoHAsync, dst, src, len, frame.stream());
        if (st == TF_OK) st = TF_CU(api, cuStreamSynchronize, frame.stream());
        return tf::finish_host_copy(frame, host_kind, dst, len, st);
    });
}

}  // extern "C"
