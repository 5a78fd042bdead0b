// SPDX-License-Identifier: MIT OR Apache-2.0
// The log callback: tf_set_log_callback.
#include "api/guard.h"
#include "util/log.h"

extern "C" {

TF_API tf_status tf_set_log_callback(tf_log_fn fn, void *user_data) {
    static const char op[] = "tf_set_log_callback";
    return tf::guarded(op, [&]() -> tf_status {
        if (!tf::set_log_callback(fn, user_data))
            return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                           "called from inside a log callback, which would deadlock");
        return TF_OK;
    });
}

}  // extern "C"
