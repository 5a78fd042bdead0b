// SPDX-License-Identifier: MIT OR Apache-2.0
// C++ exceptions thrown by the callbacks of the stream-work calls never
// leave the library: the call reports TF_ERROR_CALLBACK, the caller's
// context comes back, the slot lock is released; a release that throws is
// logged and the queue carries on.
#include <cstring>
#include <stdexcept>

extern "C" {
#include "support/test_support.h"
}

namespace {

int32_t cublas_throws(void *, void *, void *) { throw std::runtime_error("cuBLAS callback boom"); }
int32_t stream_throws(void *, void *) { throw 42; }
int32_t cublas_ok(void *, void *, void *) { return 0; }
int32_t stream_ok(void *, void *) { return 0; }
int32_t lt_throws(void *, void *, uint64_t, uint64_t, void *) {
    throw std::runtime_error("cuBLASLt callback boom");
}
int32_t lt_ok(void *, void *, uint64_t, uint64_t, void *) { return 0; }

// Skips the cuBLASLt half on a GPU machine without cuBLASLt.
bool cublaslt_loadable() {
    void *f = nullptr;
    return tf_cublaslt_symbol("cublasLtCreate", &f) == TF_OK;
}

int released = 0;
void release_throws(void *, void *) {
    ++released;
    throw std::logic_error("release boom");
}

void check_callback_exceptions(void **) {
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context();
    int32_t cublas = 0;
    assert_ok(tf_runtime_supports(rt, TF_CAP_CUBLAS, &cublas));
    raw_set_current_context(other);
    if (cublas) {
        assert_failure(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, cublas_throws, nullptr),
                       TF_ERROR_CALLBACK, "tf_cublas_enqueue", "cuBLAS callback boom");
        assert_string_equal(tf_last_error_call(), "callback");
        assert_ptr_equal(raw_current_context(), other);
        // The slot lock was released: the next call works.
        assert_ok(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, cublas_ok, nullptr));
    }
    if (cublaslt_loadable()) {
        assert_failure(tf_cublaslt_enqueue(rt, lt_throws, nullptr), TF_ERROR_CALLBACK,
                       "tf_cublaslt_enqueue", "cuBLASLt callback boom");
        assert_string_equal(tf_last_error_call(), "callback");
        assert_ptr_equal(raw_current_context(), other);
        assert_ok(tf_cublaslt_enqueue(rt, lt_ok, nullptr));
    }
    assert_failure(tf_stream_enqueue(rt, stream_throws, nullptr), TF_ERROR_CALLBACK,
                   "tf_stream_enqueue", "unknown type");
    assert_ptr_equal(raw_current_context(), other);
    assert_ok(tf_stream_enqueue(rt, stream_ok, nullptr));
    raw_set_current_context(nullptr);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
}

void release_exception_is_logged(void **) {
    tf_runtime *rt = new_runtime();
    tf_retirement_stats s;
    released = 0;
    assert_ok(tf_workspace_retire(rt, nullptr, release_throws, nullptr));
    // a last error the release must not replace
    assert_int_equal(tf_runtime_retain(nullptr), TF_ERROR_INVALID_ARGUMENT);
    log_capture_start();
    assert_ok(tf_runtime_sync(rt));
    const char *log = log_capture_stop();
    assert_int_equal(released, 1);
    assert_non_null(std::strstr(log, "release boom"));
    assert_string_equal(tf_last_error_operation(), "tf_runtime_retain");
    tf_retirement_stats_init(&s, sizeof s);
    assert_ok(tf_workspace_stats(rt, &s));
    assert_int_equal(s.released, 1);
    assert_ok(tf_workspace_retire(rt, nullptr, release_throws, nullptr));
    log_capture_start();
    assert_ok(tf_runtime_release(rt));  // teardown runs it too, and carries on
    log_capture_stop();
    assert_int_equal(released, 2);
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        TF_TEST(check_callback_exceptions),
        TF_TEST(release_exception_is_logged),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
