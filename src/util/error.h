/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Thread-local last error: the record every failing public function leaves,
// and the name of the public function running on the thread.
#pragma once

#include <cstdint>

#include "tenferro_gpu.h"

namespace tf {

// NOTE [operation name] (src/README.md): a public function names itself
// once, at the ABI boundary: the guard (api/guard.h) holds an
// OperationScope for the whole call, and every failure recorded on the
// thread meanwhile (TF_FAIL, TF_CU, fail) and every log line that names
// the operation reads it from here.  Internal functions take no operation
// parameter.  A scope restores the name it replaced when it goes, so a
// library call made from inside a callback names itself and, on return,
// the outer call's name is back.

// INVARIANT: trivially destructible, like the last error (a thread's exit
// runs no code of this library); NULL outside every public function.
inline thread_local const char *t_operation = nullptr;

// The public function running on this thread ("tf_runtime_sync"), or ""
// outside every public function.
inline const char *current_operation() { return t_operation ? t_operation : ""; }

// The address of the thread's t_operation.  Each lookup is a call of
// __tls_get_addr (the library is dlopen'd: global-dynamic TLS), which the
// compiler would rather repeat than keep the address in a register; the
// empty asm hides where the address came from, so it is kept.
inline const char **operation_slot() {
    const char **slot = &t_operation;
    asm("" : "+r"(slot));
    return slot;
}

// Names the thread's operation for the scope's life; the name it replaced
// is back when it goes (by return, exception or thread cancellation).
// The thread's slot is looked up once: a public call runs on one thread
// from its entry to its return, callbacks included.
class OperationScope {
public:
    explicit OperationScope(const char *op) : slot_(operation_slot()), outer_(*slot_) {
        *slot_ = op;
    }
    ~OperationScope() { *slot_ = outer_; }
    OperationScope(const OperationScope &) = delete;
    OperationScope &operator=(const OperationScope &) = delete;

private:
    const char **const slot_;
    const char *const outer_;
};

// Records a failure of the current operation on the calling thread and
// returns `status`.
//   call:  the call inside it that failed ("cuStreamSynchronize"), or ""
//   domain/code: enum tf_code_domain and the numeric result
//   fmt:   the detail, a literal format; caller-provided strings are only
//          ever passed as %s arguments, never as the format.
// The stored message is "<operation>: <detail>", truncated to fit.
tf_status fail(tf_status status, const char *call, int32_t domain, int32_t code, const char *fmt,
               ...) __attribute__((format(printf, 5, 6)));

// Shorthand for a failure the library itself detects (no numeric code).
#define TF_FAIL(status, ...) ::tf::fail((status), "", TF_CODE_NONE, 0, __VA_ARGS__)

// Snapshot and restore of the thread's record, for probes that must not
// disturb what the caller last saw (tf_gpu_available).
struct ErrorSnapshot {
    tf_error_info info;
};
void save_error(ErrorSnapshot *out);
void restore_error(const ErrorSnapshot &saved);

// INVARIANT: a call that returns TF_OK leaves the thread's record as it
// was.  Work whose failure a successful call swallows (a probe that answers
// "no", teardown, a release with nobody to report to) runs under this
// guard, which puts the record back when it goes.
class KeepLastError {
public:
    KeepLastError() { save_error(&saved_); }
    ~KeepLastError() { restore_error(saved_); }
    KeepLastError(const KeepLastError &) = delete;
    KeepLastError &operator=(const KeepLastError &) = delete;

private:
    ErrorSnapshot saved_;
};

}  // namespace tf

namespace tf {
// The calling thread's record, read-only.
const tf_error_info &current_error();
}  // namespace tf
