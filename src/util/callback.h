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
// Inlined into the caller: the guard costs nothing on the path that throws
// nothing.
template <class Body>
inline __attribute__((always_inline)) tf_status catch_callback(Body &&body) {
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

// Records a callback's nonzero return as TF_ERROR_CALLBACK.
tf_status fail_callback_returned(int32_t rc) __attribute__((cold, noinline));

template <class Fn, class... Args>
inline __attribute__((always_inline)) tf_status invoke_callback(Fn fn, Args... args) {
    int32_t rc = 0;
    tf_status st = catch_callback([&] { rc = fn(args...); });
    if (__builtin_expect(st != TF_OK, 0)) return st;
    if (__builtin_expect(rc != 0, 0)) return fail_callback_returned(rc);
    return TF_OK;
}

}  // namespace tf
