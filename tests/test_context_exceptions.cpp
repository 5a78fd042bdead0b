// SPDX-License-Identifier: MIT OR Apache-2.0
// A C++ exception thrown by a callback never leaves the library, and the
// caller's context still comes back.
#include <stdexcept>
#include <string>

extern "C" {
#include "support/test_support.h"
}

namespace {

int32_t throws_runtime_error(void *) { throw std::runtime_error("boom from the callback"); }
int32_t throws_int(void *) { throw 7; }

void check_throwing_callback(int32_t (*fn)(void *), const char *fragment) {
    tf_runtime *rt = new_runtime();
    void *other = raw_create_context();
    raw_set_current_context(other);
    tf_status st = tf_with_context(rt, fn, nullptr);
    assert_failure(st, TF_ERROR_CALLBACK, "tf_with_context", fragment);
    assert_string_equal(tf_last_error_call(), "callback");
    assert_ptr_equal(raw_current_context(), other);
    raw_set_current_context(nullptr);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
}

void std_exception_becomes_callback_error(void **) {
    check_throwing_callback(throws_runtime_error, "boom from the callback");
}

void unknown_exception_becomes_callback_error(void **) {
    check_throwing_callback(throws_int, "unknown type");
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        TF_TEST(std_exception_becomes_callback_error),
        TF_TEST(unknown_exception_becomes_callback_error),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
