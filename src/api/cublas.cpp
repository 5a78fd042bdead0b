// SPDX-License-Identifier: MIT OR Apache-2.0
// cuBLAS on the slot streams: tf_cublas_enqueue, tf_cublas_symbol,
// tf_cublas_version.
#include "api/guard.h"
#include "driver/vendor_symbol.h"
#include "driver/cublas_library.h"
#include "runtime/call_frame.h"
#include "runtime/graph_capture.h"
#include "runtime/slot_cublas.h"
#include "util/callback.h"

namespace {

// The slot's handle, made at the slot's first call.  Slot lock held.
tf_status slot_handle(tf::RuntimeState &state, CUstream stream, tf::SlotCublas *slot,
                      const tf::CublasApi **out) {
    const tf::CublasApi *cublas = tf::load_cublas();
    if (!cublas) return tf::current_error().status;
    *out = cublas;
    if (slot->handle) return TF_OK;
    return tf::create_slot_cublas(state.api(), *cublas, stream,
                                  state.options().cublas_workspace_bytes, slot);
}

}  // namespace

extern "C" {

TF_API tf_status tf_cublas_enqueue(tf_runtime *rt, int32_t pointer_mode,
                                   int32_t (*fn)(void *cublas_handle, void *stream,
                                                 void *user_data),
                                   void *user_data) {
    static const char op[] = "tf_cublas_enqueue";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!fn) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "fn is NULL");
        if (pointer_mode != TF_CUBLAS_POINTER_MODE_HOST &&
            pointer_mode != TF_CUBLAS_POINTER_MODE_DEVICE)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                           "pointer_mode %d is neither TF_CUBLAS_POINTER_MODE_HOST (0) nor "
                           "TF_CUBLAS_POINTER_MODE_DEVICE (1)",
                           static_cast<int>(pointer_mode));
        tf::CallFrame frame(rt);
        tf_status st = frame.enter(tf::CallerCode::runs);
        if (st == TF_OK) st = frame.lock_slot();
        if (st != TF_OK) return st;
        const tf::CublasApi *cublas = nullptr;
        tf::SlotCublas &c = frame.resources().cublas;
        if ((st = slot_handle(state, frame.stream(), &c, &cublas)) != TF_OK) return st;
        tf::note_workspace_use(frame);  // a graph's launches order their use of it
        cublasStatus_t set =
            cublas->set_pointer_mode(c.handle, static_cast<cublasPointerMode_t>(pointer_mode));
        if (set != CUBLAS_STATUS_SUCCESS)
            return tf::fail_cublas(*cublas, "cublasSetPointerMode_v2", set);
        int32_t rc = 0;
        st = tf::catch_callback([&] { rc = fn(c.handle, frame.stream(), user_data); });
        if (st != TF_OK) return st;
        return rc == 0 ? TF_OK : tf::fail_cublas(*cublas, "callback", rc);
    });
}

TF_API tf_status tf_cublas_symbol(const char *name, void **out_function) {
    static const char op[] = "tf_cublas_symbol";
    return tf::guarded(op, [&]() -> tf_status {
        return tf::vendor_symbol("cuBLAS", "cublas", name, out_function, []() -> void * {
            const tf::CublasApi *cublas = tf::load_cublas();
            return cublas ? cublas->handle : nullptr;
        });
    });
}

TF_API tf_status tf_cublas_version(int32_t *out_version) {
    static const char op[] = "tf_cublas_version";
    return tf::guarded(op, [&]() -> tf_status {
        if (!out_version) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_version is NULL");
        const tf::CublasApi *cublas = tf::load_cublas();
        if (!cublas) return tf::current_error().status;
        const libraryPropertyType parts[] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
        int value[3] = {0, 0, 0};
        for (int i = 0; i < 3; ++i) {
            cublasStatus_t s = cublas->get_property(parts[i], &value[i]);
            if (s != CUBLAS_STATUS_SUCCESS) return tf::fail_cublas(*cublas, "cublasGetProperty", s);
        }
        *out_version = value[0] * 10000 + value[1] * 100 + value[2];
        return TF_OK;
    });
}

}  // extern "C"
