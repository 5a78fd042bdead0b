/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Loading CUDA: the driver by SONAME (or an absolute override), entry points
 * through cuGetProcAddress with explicit versions, and the failure cases told
 * apart: no driver, a stub driver, no device, a missing entry point.
 *
 * The library loads the driver once per process, so each case runs in a
 * fresh child process of this executable (run_child). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

/* ---- child scenarios: exit 0 when the library behaved ------------------- */

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, \
                    #cond, tf_last_error_message());                                          \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)

static int expect_everything_fails_with(tf_status expected, const char *fragment) {
    int32_t n = 0;
    tf_runtime *rt = NULL;
    tf_device_properties p;
    tf_device_properties_init(&p, sizeof p);
    CHECK(tf_device_count(&n) == expected);
    CHECK(strstr(tf_last_error_message(), fragment) != NULL);
    CHECK(strcmp(tf_last_error_operation(), "tf_device_count") == 0);
    CHECK(tf_device_info(0, &p) == expected);
    CHECK(tf_runtime_new(0, &rt) == expected && rt == NULL);
    CHECK(strstr(tf_last_error_message(), fragment) != NULL);
    CHECK(tf_gpu_available() == 0);
    return 0;
}

static int no_driver(void) {
    return expect_everything_fails_with(TF_ERROR_DRIVER_NOT_FOUND, "LD_LIBRARY_PATH");
}

static int relative_override_is_refused(void) {
    return expect_everything_fails_with(TF_ERROR_DRIVER_NOT_FOUND, "must be an absolute path");
}

static int absolute_override_is_used(void) {
    int32_t n = 0;
    CHECK(tf_device_count(&n) == TF_OK && n == 1);
    CHECK(tf_gpu_available() == 1);
    return 0;
}

static int probe_system_driver(void) {
    return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) ? 0 : 1;
}

/* The toolkit's stub answers every call with CUDA_ERROR_STUB_LIBRARY. */
static int stub_driver(void) {
    CHECK(tfd() != NULL);
    tfd()->tfd_fail("*", 1, CUDA_ERROR_STUB_LIBRARY, 0);
    return expect_everything_fails_with(TF_ERROR_DRIVER_STUB, "stub");
}

/* A stub answering only cuInit: reported, and cuInit is retried later. */
static int stub_at_init_then_retried(void) {
    int32_t n = 0;
    CHECK(tfd() != NULL);
    tfd()->tfd_fail("cuInit", 1, CUDA_ERROR_STUB_LIBRARY, 1);
    CHECK(tf_device_count(&n) == TF_ERROR_DRIVER_STUB);
    CHECK(strcmp(tf_last_error_call(), "cuInit") == 0);
    CHECK(tf_last_error_code() == CUDA_ERROR_STUB_LIBRARY);
    CHECK(tf_device_count(&n) == TF_OK && n == 1);
    CHECK(tfd()->tfd_calls("cuInit") == 2);
    CHECK(tf_device_count(&n) == TF_OK);
    CHECK(tfd()->tfd_calls("cuInit") == 2); /* once it succeeded, never again */
    return 0;
}

static int no_device(void) {
    int32_t n = 9;
    tf_runtime *rt = NULL;
    CHECK(tfd() != NULL);
    tfd()->tfd_set_devices(0);
    CHECK(tf_device_count(&n) == TF_OK && n == 0);
    CHECK(tf_runtime_new(0, &rt) == TF_ERROR_NO_DEVICE && rt == NULL);
    CHECK(strcmp(tf_last_error_call(), "cuInit") == 0);
    CHECK(strstr(tf_last_error_message(), "CUDA_ERROR_NO_DEVICE (100)") != NULL);
    CHECK(tf_gpu_available() == 0);
    return 0;
}

static int init_failure_is_a_cuda_error(void) {
    tf_runtime *rt = NULL;
    CHECK(tfd() != NULL);
    tfd()->tfd_fail("cuInit", 1, CUDA_ERROR_UNKNOWN, 1);
    CHECK(tf_runtime_new(0, &rt) == TF_ERROR_CUDA);
    CHECK(strstr(tf_last_error_message(), "cuInit failed: CUDA_ERROR_UNKNOWN (999)") != NULL);
    CHECK(tf_runtime_new(0, &rt) == TF_OK);
    CHECK(tf_runtime_release(rt) == TF_OK);
    return 0;
}

/* A driver without cuDeviceGetUuid: describing a device is not supported,
 * counting still works, nothing crashes. */
static int missing_entry_disables_what_needs_it(void) {
    int32_t n = 0;
    tf_device_properties p;
    tf_runtime *rt = NULL;
    CHECK(tfd() != NULL);
    tfd()->tfd_hide("cuDeviceGetUuid");
    tf_device_properties_init(&p, sizeof p);
    CHECK(tf_device_count(&n) == TF_OK && n == 1);
    CHECK(tf_device_info(0, &p) == TF_ERROR_NOT_SUPPORTED);
    CHECK(strstr(tf_last_error_message(), "does not provide cuDeviceGetUuid") != NULL);
    CHECK(strcmp(tf_last_error_call(), "cuDeviceGetUuid") == 0);
    CHECK(tf_runtime_new(0, &rt) == TF_ERROR_NOT_SUPPORTED);
    CHECK(tfd()->tfd_primary_refcount(0) == 0);
    return 0;
}

/* Without module entry points the runtime still works; the capability says no. */
static int missing_module_entries_clear_the_capability(void) {
    tf_runtime *rt = NULL;
    int32_t yes = 1;
    void *s = NULL;
    CHECK(tfd() != NULL);
    tfd()->tfd_hide("cuModuleLoadDataEx");
    CHECK(tf_runtime_new(0, &rt) == TF_OK);
    CHECK(tf_runtime_supports(rt, TF_CAP_NATIVE_MODULES, &yes) == TF_OK && yes == 0);
    CHECK(tf_runtime_stream(rt, &s) == TF_OK);
    CHECK(tf_runtime_sync(rt) == TF_OK);
    CHECK(tf_runtime_release(rt) == TF_OK);
    return 0;
}

/* Without cuCtxSetCurrent nothing can switch contexts: a clear refusal. */
static int missing_context_entry_is_not_supported(void) {
    tf_runtime *rt = NULL;
    void *s = NULL;
    CHECK(tfd() != NULL);
    tfd()->tfd_hide("cuCtxSetCurrent");
    CHECK(tf_runtime_new(0, &rt) == TF_OK);
    CHECK(tf_runtime_stream(rt, &s) == TF_ERROR_NOT_SUPPORTED);
    CHECK(strstr(tf_last_error_message(), "cuCtxSetCurrent") != NULL);
    CHECK(tf_runtime_release(rt) == TF_OK);
    return 0;
}

/* A driver for CUDA 11.8 lacks what the library needs: told apart clearly. */
static int driver_too_old(void) {
    CHECK(tfd() != NULL);
    tfd()->tfd_set_driver_version(11080);
    return expect_everything_fails_with(TF_ERROR_DRIVER_TOO_OLD, "CUDA 12.0 (12000) or newer");
}

/* A driver that cannot tell its version is used anyway: the entry points it
 * gave through cuGetProcAddress are what the library relies on. */
static int unknown_driver_version_is_not_fatal(void) {
    int32_t n = 0;
    CHECK(tfd() != NULL);
    tfd()->tfd_fail("cuDriverGetVersion", 1, CUDA_ERROR_UNKNOWN, 1);
    CHECK(tf_device_count(&n) == TF_OK && n == 1);
    CHECK(tfd()->tfd_calls("cuDriverGetVersion") == 1);
    return 0;
}

static const struct child_scenario scenarios[] = {
    {"unknown_driver_version_is_not_fatal", unknown_driver_version_is_not_fatal},
    {"driver_too_old", driver_too_old},
    {"no_driver", no_driver},
    {"relative_override_is_refused", relative_override_is_refused},
    {"absolute_override_is_used", absolute_override_is_used},
    {"probe_system_driver", probe_system_driver},
    {"stub_driver", stub_driver},
    {"stub_at_init_then_retried", stub_at_init_then_retried},
    {"no_device", no_device},
    {"init_failure_is_a_cuda_error", init_failure_is_a_cuda_error},
    {"missing_entry_disables_what_needs_it", missing_entry_disables_what_needs_it},
    {"missing_module_entries_clear_the_capability", missing_module_entries_clear_the_capability},
    {"missing_context_entry_is_not_supported", missing_context_entry_is_not_supported},
    {NULL, NULL}};

/* ---- the tests --------------------------------------------------------- */

static void in_child(const char *name, const char *const *env) {
    int rc = run_child(name, env);
    if (rc != 0) fail_msg("child scenario %s exited with %d", name, rc);
}

static void no_driver_anywhere(void **state) {
    static const char *const env[] = {"TENFERRO_GPU_CUDA_DRIVER=/nonexistent/libcuda.so.1", NULL};
    (void)state;
    in_child("no_driver", env);
}

/* Only where no driver is installed system-wide: the SONAME search itself. */
static void no_driver_on_the_library_path(void **state) {
    static const char *const env[] = {"LD_LIBRARY_PATH=/nonexistent", NULL};
    (void)state;
    if (run_child("probe_system_driver", env) == 0) {
        print_message("    (a driver is installed system-wide: skipped)\n");
        skip();
    }
    in_child("no_driver", env);
}

static void relative_override(void **state) {
    static const char *const env[] = {"TENFERRO_GPU_CUDA_DRIVER=libcuda.so.1", NULL};
    (void)state;
    in_child("relative_override_is_refused", env);
}

static void absolute_override(void **state) {
    char var[4200];
    const char *env[] = {var, "LD_LIBRARY_PATH=/nonexistent", NULL};
    (void)state;
    REQUIRE_DOUBLE();
    snprintf(var, sizeof var, "TENFERRO_GPU_CUDA_DRIVER=%s", double_link_path());
    in_child("absolute_override_is_used", env);
}

#define CHILD_TEST(name)                    \
    static void name##_test(void **state) { \
        (void)state;                        \
        REQUIRE_DOUBLE();                   \
        in_child(#name, NULL);              \
    }
CHILD_TEST(stub_driver)
CHILD_TEST(driver_too_old)
CHILD_TEST(unknown_driver_version_is_not_fatal)
CHILD_TEST(stub_at_init_then_retried)
CHILD_TEST(no_device)
CHILD_TEST(init_failure_is_a_cuda_error)
CHILD_TEST(missing_entry_disables_what_needs_it)
CHILD_TEST(missing_module_entries_clear_the_capability)
CHILD_TEST(missing_context_entry_is_not_supported)

/* Every entry point is asked for with the version whose prototype the
 * library calls, and with legacy default-stream semantics. */
static void entry_points_are_resolved_with_explicit_versions(void **state) {
    int32_t n = 0;
    (void)state;
    REQUIRE_DOUBLE();
    assert_ok(tf_device_count(&n));
#define TF_DRIVER_ENTRY(name, version)                              \
    assert_int_equal(tfd()->tfd_requested_version(#name), version); \
    assert_int_equal(tfd()->tfd_requested_flags(#name), CU_GET_PROC_ADDRESS_LEGACY_STREAM);
#include "../src/driver/driver_entries.inc"
#undef TF_DRIVER_ENTRY
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(no_driver_anywhere),
        TF_TEST(no_driver_on_the_library_path),
        TF_TEST(relative_override),
        TF_TEST(absolute_override),
        TF_TEST(stub_driver_test),
        TF_TEST(driver_too_old_test),
        TF_TEST(unknown_driver_version_is_not_fatal_test),
        TF_TEST(stub_at_init_then_retried_test),
        TF_TEST(no_device_test),
        TF_TEST(init_failure_is_a_cuda_error_test),
        TF_TEST(missing_entry_disables_what_needs_it_test),
        TF_TEST(missing_module_entries_clear_the_capability_test),
        TF_TEST(missing_context_entry_is_not_supported_test),
        TF_TEST(entry_points_are_resolved_with_explicit_versions),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
