/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Thread cancellation and pthread_exit() unwind the stack with a foreign
// exception (abi::__forced_unwind) that must never be swallowed: a handler
// that does not rethrow it aborts the process.
//
// A catch (abi::__forced_unwind &) clause names it, but binds a reference
// to no object (the C++ runtime hands a foreign exception over as NULL),
// which UBSan reports; catch (...) handlers ask foreign_unwinding() instead
// and rethrow.
#pragma once

#include <exception>

namespace tf {

// Inside a catch handler: whether the exception is not a C++ one (the C++
// runtime gives no exception_ptr for those).
inline bool foreign_unwinding() { return !std::current_exception(); }

}  // namespace tf
