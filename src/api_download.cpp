// Public downloads: tf_download_scalar (the hot path) and tf_download.
#include <cstring>

#include "cuda_status.h"
#include "device_range.h"
#include "runtime_call.h"
#include "staged_download.h"
#include "transfer/scalar_read.h"
#include "transfer_common.h"

namespace {

tf_status fail_scalar_len(const char *op, size_t len) __attribute__((cold, noinline));
tf_status fail_scalar_len(const char *op, size_t len) {
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op,
                   "len %zu is over TF_SCALAR_DOWNLOAD_MAX_BYTES (%d); use tf_download", len,
                   TF_SCALAR_DOWNLOAD_MAX_BYTES);
}

}  // namespace

extern "C" {

TF_API tf_status tf_download_scalar(tf_runtime *rt, uint64_t src, void *out, size_t len) {
    static const char op[] = "tf_download_scalar";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "out is NULL");
        if (len > TF_SCALAR_DOWNLOAD_MAX_BYTES) return fail_scalar_len(op, len);
        tf::ContextScope scope;
        int slot = 0;
        CUstream stream = nullptr;
        tf_status st = tf::enter_slot_stream(op, rt, scope, &slot, &stream);
        if (st == TF_OK) st = tf::check_device_range(state, op, "src", src, len);
        if (st != TF_OK) return st;
        return tf::read_scalar(state, op, slot, stream, src, out, len, tf::ScalarReadPlan());
    });
}

TF_API tf_status tf_download(tf_runtime *rt, uint64_t src, void *dst, size_t len) {
    static const char op[] = "tf_download";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (len == 0) return TF_OK;
        if (!dst) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, op, "dst is NULL");
        const tf::DriverApi &api = state.api();
        tf::HostTransfer t;
        tf_status st = t.open(op, rt, "src", src, "dst", dst, len);
        if (st != TF_OK) return st;
        if (t.host_kind == tf::HostMemory::pageable && len > tf::kStagedDownloadAbove)
            return tf::download_staged(state, op, t.slot, t.stream, src, dst, len);
        // Page-locked memory the device writes directly; small pageable
        // copies go through the driver's own staging.
        st = TF_CU(api, op, cuMemcpyDtoHAsync, dst, src, len, t.stream);
        return st == TF_OK ? TF_CU(api, op, cuStreamSynchronize, t.stream) : st;
    });
}

}  // extern "C"
