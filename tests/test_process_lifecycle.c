/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Whole-process behaviour: exiting with runtimes still alive, and loading
 * and unloading the library many times. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/test_support.h"

static int32_t noop(void *user_data) {
    (void)user_data;
    return 0;
}

/* Streams with work, a retained and a bound handle, nothing released. */
static int leave_runtimes_alive(tf_runtime **a, tf_runtime **b) {
    void *s = NULL;
    tf_runtime *bound = NULL;
    if (tf_runtime_new(0, a) != TF_OK || tf_runtime_new(0, b) != TF_OK) return 1;
    if (tf_runtime_stream(*a, &s) != TF_OK || tf_with_context(*a, noop, NULL) != TF_OK) return 1;
    if (tf_runtime_bind_slot(*b, 1, &bound) != TF_OK || tf_runtime_stream(bound, &s) != TF_OK)
        return 1;
    return tf_runtime_retain(*a) == TF_OK ? 0 : 1;
}

static int exit_without_release(void) {
    tf_runtime *a, *b;
    if (leave_runtimes_alive(&a, &b)) return 1;
    exit(0); /* atexit handlers and static destructors run */
}

static int return_from_main_without_release(void) {
    tf_runtime *a, *b;
    return leave_runtimes_alive(&a, &b);
}

static const struct child_scenario scenarios[] = {
    {"exit_without_release", exit_without_release},
    {"return_from_main_without_release", return_from_main_without_release},
    {NULL, NULL}};

static void exit_with_live_runtimes_is_clean(void **state) {
    /* Leaking the handles is the point here; LeakSanitizer would say so. */
    static const char *const env[] = {"ASAN_OPTIONS=detect_leaks=0", NULL};
    (void)state;
    assert_int_equal(run_child("exit_without_release", env), 0);
    assert_int_equal(run_child("return_from_main_without_release", env), 0);
}

static void load_and_unload_100_times(void **state) {
    char self[4096], dir[4096], helper[4300], lib[4300], cmd[9000];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash;
    (void)state;
    assert_true(n > 0);
    self[n] = '\0';
    strcpy(dir, self);
    slash = strrchr(dir, '/');
    assert_non_null(slash);
    *slash = '\0';
    snprintf(helper, sizeof helper, "%s/helpers/load_unload", dir);
    snprintf(lib, sizeof lib, "%s/../lib/libtenferro_gpu.so.1", dir);
    snprintf(cmd, sizeof cmd, "'%s' '%s'", helper, lib);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(exit_with_live_runtimes_is_clean),
        TF_TEST(load_and_unload_100_times),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
