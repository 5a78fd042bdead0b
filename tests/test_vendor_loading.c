/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Loading cuBLAS and NVRTC: lazily, by SONAME (13 first, then 12) or from
 * an absolute override path; a missing library is TF_ERROR_LIBRARY_NOT_FOUND
 * with what to add to LD_LIBRARY_PATH, and the capability says 0.
 *
 * Each library is loaded once per process, so each case runs in a fresh
 * child.  The SONAME search itself is tested in children started through the
 * dynamic loader with --inhibit-cache: the real libcublas.so.13 may be in
 * ld.so.cache, and only a library path without it shows the "not found" and
 * fallback cases. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/test_support.h"

static int called;

static int32_t count_call(void *handle, void *stream, void *user_data) {
    (void)handle, (void)stream, (void)user_data;
    called++;
    return 0;
}

/* ---- child scenarios -------------------------------------------------- */

/* Everything that needs cuBLAS fails alike; nothing else is disturbed. */
static int cublas_missing_with(const char *fragment) {
    tf_runtime *rt = NULL;
    void *f = NULL;
    int32_t yes = 1, version = 0;
    SCENARIO_CHECK(tf_runtime_new(0, &rt) == TF_OK);
    SCENARIO_CHECK(tf_runtime_supports(rt, TF_CAP_CUBLAS, &yes) == TF_OK && yes == 0);
    SCENARIO_CHECK(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, count_call, NULL) ==
                   TF_ERROR_LIBRARY_NOT_FOUND);
    SCENARIO_CHECK(strcmp(tf_last_error_operation(), "tf_cublas_enqueue") == 0);
    SCENARIO_CHECK(strstr(tf_last_error_message(), fragment) != NULL);
    SCENARIO_CHECK(called == 0);
    SCENARIO_CHECK(raw_current_context() == NULL);
    SCENARIO_CHECK(tf_cublas_symbol("cublasSgemm_v2", &f) == TF_ERROR_LIBRARY_NOT_FOUND &&
                   f == NULL);
    SCENARIO_CHECK(tf_cublas_version(&version) == TF_ERROR_LIBRARY_NOT_FOUND && version == 0);
    /* The rest of the runtime works. */
    SCENARIO_CHECK(tf_runtime_sync(rt) == TF_OK);
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    return 0;
}

static int cublas_override_missing(void) {
    return cublas_missing_with("TENFERRO_GPU_CUBLAS=/nonexistent/libcublas.so.13");
}

static int cublas_override_relative(void) {
    return cublas_missing_with("TENFERRO_GPU_CUBLAS must be an absolute path");
}

static int cublas_not_on_the_path(void) {
    SCENARIO_CHECK(cublas_missing_with("LD_LIBRARY_PATH") == 0);
    return cublas_missing_with("libcublas.so.13");
}

/* cuBLAS 12 is used when 13 is absent (or named by the override). */
static int cublas_12_is_used(void) {
    tf_runtime *rt = NULL;
    int32_t version = 0, yes = 0;
    SCENARIO_CHECK(tf_runtime_new(0, &rt) == TF_OK);
    SCENARIO_CHECK(tf_runtime_supports(rt, TF_CAP_CUBLAS, &yes) == TF_OK && yes == 1);
    SCENARIO_CHECK(tf_cublas_version(&version) == TF_OK);
    SCENARIO_CHECK(version == 120900);
    SCENARIO_CHECK(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, count_call, NULL) == TF_OK);
    SCENARIO_CHECK(called == 1);
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    return 0;
}

static int nvrtc_missing_with(const char *fragment) {
    tf_runtime *rt = NULL;
    tf_program *p = NULL;
    int32_t yes = 1;
    SCENARIO_CHECK(tf_runtime_new(0, &rt) == TF_OK);
    SCENARIO_CHECK(tf_runtime_supports(rt, TF_CAP_RUNTIME_COMPILATION, &yes) == TF_OK && yes == 0);
    SCENARIO_CHECK(tf_program_compile(rt, "extern \"C\" __global__ void k() {}", NULL, &p) ==
                   TF_ERROR_LIBRARY_NOT_FOUND);
    SCENARIO_CHECK(p == NULL);
    SCENARIO_CHECK(strcmp(tf_last_error_operation(), "tf_program_compile") == 0);
    SCENARIO_CHECK(strstr(tf_last_error_message(), fragment) != NULL);
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    return 0;
}

static int nvrtc_override_missing(void) {
    return nvrtc_missing_with("TENFERRO_GPU_NVRTC=/nonexistent/libnvrtc.so.13");
}

static int nvrtc_not_on_the_path(void) {
    SCENARIO_CHECK(nvrtc_missing_with("LD_LIBRARY_PATH") == 0);
    return nvrtc_missing_with("libnvrtc.so.13");
}

/* The driver from TENFERRO_GPU_CUDA_DRIVER, cuBLAS from the loader's path:
 * a real cuBLAS finds its own libcuda.so.1 through that path and, finding
 * no driver or another one, cannot initialize.  The message says so (the
 * failure is injected: the cuBLAS double shares the driver double). */
static int cublas_not_initialized_beside_the_driver_override(void) {
    tf_runtime *rt = NULL;
    const char *msg;
    SCENARIO_CHECK(tf_runtime_new(0, &rt) == TF_OK);
    SCENARIO_CHECK(tfd() != NULL);
    tfd()->tfd_fail("cublasCreate_v2", 1, 1 /* CUBLAS_STATUS_NOT_INITIALIZED */, 1);
    SCENARIO_CHECK(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, count_call, NULL) ==
                   TF_ERROR_PROVIDER);
    msg = tf_last_error_message();
    SCENARIO_CHECK(strstr(msg, "CUBLAS_STATUS_NOT_INITIALIZED (1)") != NULL);
    SCENARIO_CHECK(strstr(msg, "libcublas.so.13") != NULL);
    SCENARIO_CHECK(strstr(msg, "not the TENFERRO_GPU_CUDA_DRIVER=/") != NULL);
    SCENARIO_CHECK(strstr(msg, "LD_LIBRARY_PATH") != NULL);
    SCENARIO_CHECK(called == 0);
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    return 0;
}

static const struct child_scenario scenarios[] = {
    {"cublas_override_missing", cublas_override_missing},
    {"cublas_override_relative", cublas_override_relative},
    {"cublas_not_on_the_path", cublas_not_on_the_path},
    {"cublas_12_is_used", cublas_12_is_used},
    {"nvrtc_override_missing", nvrtc_override_missing},
    {"nvrtc_not_on_the_path", nvrtc_not_on_the_path},
    {"cublas_not_initialized_beside_the_driver_override",
     cublas_not_initialized_beside_the_driver_override},
    {NULL, NULL},
};

/* ---- the parent's tests ------------------------------------------------ */

static void override_to_a_missing_file(void **state) {
    const char *cublas[] = {"TENFERRO_GPU_CUBLAS=/nonexistent/libcublas.so.13", NULL};
    const char *nvrtc[] = {"TENFERRO_GPU_NVRTC=/nonexistent/libnvrtc.so.13", NULL};
    (void)state;
    assert_int_equal(run_child("cublas_override_missing", cublas), 0);
    assert_int_equal(run_child("nvrtc_override_missing", nvrtc), 0);
}

static void relative_override_is_refused(void **state) {
    const char *env[] = {"TENFERRO_GPU_CUBLAS=libcublas.so.13", NULL};
    (void)state;
    assert_int_equal(run_child("cublas_override_relative", env), 0);
}

/* The double's folders: .../double (libcuda.so.1, libcublas.so.13,
 * libnvrtc.so.13) and .../double12 (libcublas.so.12). */
static void double_dirs(char *dir, char *dir12, size_t cap) {
    char *slash;
    assert_non_null(realpath(double_link_path(), dir));
    slash = strrchr(dir, '/');
    *slash = '\0';
    snprintf(dir12, cap, "%s12", dir);
}

static void absolute_override_is_used(void **state) {
    char dir[PATH_MAX], dir12[PATH_MAX], var[PATH_MAX + 64];
    const char *env[] = {var, NULL};
    (void)state;
    REQUIRE_DOUBLE();
    double_dirs(dir, dir12, sizeof dir12);
    snprintf(var, sizeof var, "TENFERRO_GPU_CUBLAS=%s/libcublas.so.12", dir12);
    assert_int_equal(run_child("cublas_12_is_used", env), 0);
}

/* A folder holding only the driver double, for a library path without any
 * cuBLAS or NVRTC. */
static void driver_only_dir(char *out, size_t cap, const char *dir) {
    char target[PATH_MAX], link[PATH_MAX + 32];
    snprintf(out, cap, "/tmp/tf-driver-only-XXXXXX");
    assert_non_null(mkdtemp(out));
    snprintf(target, sizeof target, "%s/libcuda.so.1", dir);
    snprintf(link, sizeof link, "%s/libcuda.so.1", out);
    assert_int_equal(symlink(target, link), 0);
}

static void remove_driver_only_dir(const char *tmp) {
    char link[PATH_MAX + 32];
    snprintf(link, sizeof link, "%s/libcuda.so.1", tmp);
    unlink(link);
    rmdir(tmp);
}

static void soname_search_without_cublas(void **state) {
    char dir[PATH_MAX], dir12[PATH_MAX], tmp[64];
    (void)state;
    REQUIRE_DOUBLE();
    double_dirs(dir, dir12, sizeof dir12);
    driver_only_dir(tmp, sizeof tmp, dir);
    assert_int_equal(run_child_with_loader("cublas_not_on_the_path", NULL, tmp), 0);
    assert_int_equal(run_child_with_loader("nvrtc_not_on_the_path", NULL, tmp), 0);
    remove_driver_only_dir(tmp);
}

static void soname_search_falls_back_to_cublas_12(void **state) {
    char dir[PATH_MAX], dir12[PATH_MAX], tmp[64], path[PATH_MAX * 2];
    (void)state;
    REQUIRE_DOUBLE();
    double_dirs(dir, dir12, sizeof dir12);
    driver_only_dir(tmp, sizeof tmp, dir);
    snprintf(path, sizeof path, "%s:%s", tmp, dir12);
    assert_int_equal(run_child_with_loader("cublas_12_is_used", NULL, path), 0);
    remove_driver_only_dir(tmp);
}

static void cublas_failure_beside_the_driver_override(void **state) {
    char driver[PATH_MAX], var[PATH_MAX + 64];
    const char *env[] = {var, NULL};
    (void)state;
    REQUIRE_DOUBLE();
    assert_non_null(realpath(double_link_path(), driver));
    snprintf(var, sizeof var, "TENFERRO_GPU_CUDA_DRIVER=%s", driver);
    assert_int_equal(run_child("cublas_not_initialized_beside_the_driver_override", env), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(override_to_a_missing_file),
        TF_TEST(relative_override_is_refused),
        TF_TEST(absolute_override_is_used),
        TF_TEST(soname_search_without_cublas),
        TF_TEST(soname_search_falls_back_to_cublas_12),
        TF_TEST(cublas_failure_beside_the_driver_override),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
