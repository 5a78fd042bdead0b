// SPDX-License-Identifier: MIT OR Apache-2.0
#include "util/callback.h"

namespace tf {

tf_status fail_callback_returned(int32_t rc) {
    return fail(TF_ERROR_CALLBACK, "callback", TF_CODE_CALLBACK, rc, "callback returned %d",
                static_cast<int>(rc));
}

}  // namespace tf
