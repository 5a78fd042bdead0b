// SPDX-License-Identifier: MIT OR Apache-2.0
// cuBLASLt on the slot streams: tf_cublaslt_enqueue, tf_cublaslt_symbol.
#include "api/guard.h"
#include "driver/vendor_symbol.h"
#include "driver/cublaslt_library.h"
#include "runtime/call_frame.h"
#include "runtime/graph_capture.h"
#include "runtime/slot_cublaslt.h"
#include "util/callback.h"

extern "C" {

TF_API tf_status tf_cublaslt_enqueue(tf_runtime *rt,
                                     int32_t (*fn)(void *lt_handle, void *stream,
                                                   uint64_t workspace, uint64_t workspace_bytes,
                                                   void *user_data),
                                     void *user_data) {
    static const char op[] = "tf_cublaslt_enqueue";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!fn) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "fn is NULL");
        tf::CallFrame frame(rt);
        tf_status st = frame.enter(tf::CallerCode::runs);
        if (st == TF_OK) st = frame.lock_slot();
        if (st != TF_OK) return st;
        const tf::CublasLtApi *lt = tf::load_cublaslt();
        if (!lt) return tf::current_error().status;
        tf::SlotCublas &c = frame.resources().cublas;
        if (!c.lt_handle &&
            (st = tf::create_slot_cublaslt(state.api(), *lt, state.options().cublas_workspace_bytes,
                                           &c)) != TF_OK)
            return st;
        tf::note_workspace_use(frame);  // a graph's launches order their use of it
        int32_t rc = 0;
        st = tf::catch_callback([&] {
            rc = fn(c.lt_handle, frame.stream(), c.workspace, c.workspace_bytes, user_data);
        });
        if (st != TF_OK) return st;
        return rc == 0 ? TF_OK : tf::fail_cublas(lt->names, "callback", rc);
    });
}

TF_API tf_status tf_cublaslt_symbol(const char *name, void **out_function) {
    static const char op[] = "tf_cublaslt_symbol";
    return tf::guarded(op, [&]() -> tf_status {
        return tf::vendor_symbol("cuBLASLt", "cublasLt", name, out_function, []() -> void * {
            const tf::CublasLtApi *lt = tf::load_cublaslt();
            return lt ? lt->handle : nullptr;
        });
    });
}

}  // extern "C"
