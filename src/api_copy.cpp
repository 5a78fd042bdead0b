// Public host-to-device and device copies: tf_upload, tf_copy.
#include "cuda_status.h"
#include "device_range.h"
#include "runtime_call.h"
#include "transfer/staged_upload.h"
#include "transfer_common.h"

extern "C" {

TF_API tf_status tf_upload(tf_runtime *rt, const void *src, uint64_t dst, size_t len) {
    static const char op[] = "tf_upload";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!src) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "src is NULL");
        const tf::DriverApi &api = state.api();
        tf::HostTransfer t;
        tf_status st = t.open(op, rt, "dst", dst, "src", src, len);
        if (st != TF_OK) return st;
        if (t.host_kind == tf::HostMemory::pageable && len > tf::kStagedUploadAbove)
            return tf::upload_staged(state, op, t.slot, t.stream, src, dst, len);
        st = TF_CU(api, op, cuMemcpyHtoDAsync, dst, src, len, t.stream);
        // The driver stages pageable memory before it returns; the device
        // reads page-locked memory itself, so wait until it has.
        if (st == TF_OK && t.host_kind == tf::HostMemory::page_locked)
            st = TF_CU(api, op, cuStreamSynchronize, t.stream);
        return st;
    });
}

TF_API tf_status tf_copy(tf_runtime *rt, uint64_t src, uint64_t dst, size_t len) {
    static const char op[] = "tf_copy";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        tf_status st = tf::check_no_overlap(op, src, dst, len);
        if (st != TF_OK) return st;
        tf::ContextScope scope;
        int slot = 0;
        CUstream stream = nullptr;
        st = tf::enter_slot_stream(op, rt, scope, &slot, &stream);
        if (st == TF_OK) st = tf::check_device_range(state, op, "src", src, len);
        if (st == TF_OK) st = tf::check_device_range(state, op, "dst", dst, len);
        if (st != TF_OK) return st;
        return TF_CU(state.api(), op, cuMemcpyDtoDAsync, dst, src, len, stream);
    });
}

}  // extern "C"
