// Thread-local last error: the record every failing public function leaves.
#pragma once

#include <cstdint>

#include "tenferro_gpu.h"

namespace tf {

// Records a failure on the calling thread and returns `status`.
//   op:    the public function ("tf_runtime_sync")
//   call:  the call inside it that failed ("cuStreamSynchronize"), or ""
//   domain/code: enum tf_code_domain and the numeric result
//   fmt:   the detail, a literal format; caller-provided strings are only
//          ever passed as %s arguments, never as the format.
// The stored message is "<op>: <detail>", truncated to fit.
tf_status fail(tf_status status, const char *op, const char *call, int32_t domain,
               int32_t code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

// Shorthand for a failure the library itself detects (no numeric code).
#define TF_FAIL(status, op, ...) ::tf::fail((status), (op), "", TF_CODE_NONE, 0, __VA_ARGS__)

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
