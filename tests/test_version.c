/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The version the header promises is the version the library reports. */
#include <stdio.h>
#include <string.h>

#include "support/test_support.h"

static void library_version_matches_header(void **state) {
    char expected[32];
    (void)state;
    assert_int_equal(tf_version(), TF_VERSION_NUMBER);
    assert_int_equal(TF_VERSION_NUMBER,
                     TF_VERSION_MAJOR * 10000 + TF_VERSION_MINOR * 100 + TF_VERSION_PATCH);
    snprintf(expected, sizeof expected, "%d.%d.%d", TF_VERSION_MAJOR, TF_VERSION_MINOR,
             TF_VERSION_PATCH);
    assert_string_equal(tf_version_string(), expected);
    assert_string_equal(TF_VERSION_STRING, expected);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(library_version_matches_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
