// The one guard around every extern "C" body: no C++ exception crosses the ABI.
#pragma once

#include <exception>
#include <new>

#include "util/error.h"
#include "util/unwind.h"

namespace tf {

// Runs `body` and maps any exception it lets escape to a status.
//   std::bad_alloc      -> TF_ERROR_OUT_OF_MEMORY
//   std::exception, ... -> TF_ERROR_INTERNAL (a bug in this library)
// Thread cancellation (abi::__forced_unwind, util/unwind.h) must keep unwinding,
// so it is rethrown; swallowing it would terminate the process.
template <class Body>
tf_status guarded(const char *op, Body &&body) {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return TF_FAIL(TF_ERROR_OUT_OF_MEMORY, op, "host memory exhausted");
    } catch (const std::exception &e) {
        return TF_FAIL(TF_ERROR_INTERNAL, op, "unexpected C++ exception: %s", e.what());
    } catch (...) {
        if (foreign_unwinding()) throw;
        return TF_FAIL(TF_ERROR_INTERNAL, op, "unexpected exception of unknown type");
    }
}

}  // namespace tf
