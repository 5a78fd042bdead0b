/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Calling a caller's callback: nonzero returns and C++ exceptions become
// TF_ERROR_CALLBACK; nothing the callback throws leaves the library.
#pragma once

#include <exception>

#include "util/error.h"
#include "util/unwind.h"

namespace tf {

// Runs `body` (which calls the caller's code); a C++ exception it throws is
// recorded as TF_ERROR_CALLBACK and returned.  What the callback
// returned is the body's business.
template <class Body>
tf_status catch_callback(Body &&body) {
    try {
        body();
    } catch (const std::exception &e) {
        return fail(TF_ERROR_CALLBACK, "callback", TF_CODE_NONE, 0,
                    "callback threw a C++ exception: %s", e.what());
    } catch (...) {
        if (foreign_unwinding()) throw;  // thread cancellation keeps unwinding
        return fail(TF_ERROR_CALLBACK, "callback", TF_CODE_NONE, 0,
                    "callback threw an exception of unknown type");
    }
    return TF_OK;
}

template <class Fn, class... Args>
tf_status invoke_callback(Fn fn, Args... args) {
    int32_t rc = 0;
    tf_status st = catch_callback([&] { rc = fn(args...); });
    if (st != TF_OK) return st;
    if (rc != 0)
        return fail(TF_ERROR_CALLBACK, "callback", TF_CODE_CALLBACK, rc, "callback returned %d",
                    static_cast<int>(rc));
    return TF_OK;
}

}  // namespace tf
