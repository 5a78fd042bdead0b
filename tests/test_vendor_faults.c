/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Failures of the vendor-library entry points the feature suites do not
 * reach on their own: the name and text functions of cuBLAS and NVRTC (a
 * message must still carry the number), cublasGetProperty, NVRTC's CUBIN
 * output and program destruction, and cuModuleGetFunction. */
#include <string.h>

#include "support/test_support.h"

static const char kSource[] =
    "extern \"C\" __global__ void tfd_fill_u32(unsigned *d, unsigned v, unsigned n)\n"
    "{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) d[i] = v; }\n";

static const char kPtx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry tfd_fill_u32(.param .u64 a, .param .u32 b, .param .u32 c)\n{\n\tret;\n}\n";

static int32_t return_status(void *handle, void *stream, void *user_data) {
    (void)handle;
    (void)stream;
    return *(int32_t *)user_data;
}

/* cuBLAS cannot name the status: the message still has the number. */
static void cublas_status_without_names(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    int32_t status = 13; /* CUBLAS_STATUS_EXECUTION_FAILED */
    INJECT("cublasGetStatusName", 1, 1, 0);
    INJECT("cublasGetStatusString", 1, 1, 0);
    assert_failure(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, return_status, &status),
                   TF_ERROR_PROVIDER, "tf_cublas_enqueue", "cuBLAS status (13)", "no description");
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_CUBLAS);
    assert_int_equal(tf_last_error_code(), 13);
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

static void cublas_version_query_failure(void **state) {
    int32_t v = -1;
    (void)state;
    REQUIRE_DOUBLE();
    INJECT("cublasGetProperty", 2, 7 /* CUBLAS_STATUS_INVALID_VALUE */, 1);
    assert_failure(tf_cublas_version(&v), TF_ERROR_PROVIDER, "tf_cublas_version",
                   "cublasGetProperty failed", "(7)");
    assert_int_equal(v, -1);
    assert_ok(tf_cublas_version(&v));
    assert_true(v >= 120000);
}

static tf_status compile_to(tf_runtime *rt, int32_t target, tf_program **out) {
    tf_compile_options o;
    tf_compile_options_init(&o, sizeof o);
    o.target = target;
    return tf_program_compile(rt, kSource, &o, out);
}

/* NVRTC cannot name its result: the compile error still has the number. */
static void nvrtc_result_without_names(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    tf_program *p = NULL;
    INJECT("nvrtcGetErrorString", 1, 1, 0);
    INJECT("nvrtcCompileProgram", 1, 4 /* NVRTC_ERROR_PROGRAM_CREATION_FAILURE */, 1);
    assert_failure(compile_to(rt, TF_COMPILE_PTX, &p), TF_ERROR_PROVIDER, "tf_program_compile",
                   "nvrtcCompileProgram failed: NVRTC result (4)");
    assert_null(p);
    assert_int_equal(tfd()->tfd_live(TFD_NVRTC_PROGRAMS), 0);
    assert_ok(tf_runtime_release(rt));
}

static void cubin_output_failures(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    static const char *const entries[] = {"nvrtcGetCUBINSize", "nvrtcGetCUBIN"};
    tf_runtime *rt = new_runtime();
    size_t i;
    for (i = 0; i < 2; ++i) {
        tf_program *p = NULL;
        tfd()->tfd_clear_faults();
        INJECT(entries[i], 1, 1 /* NVRTC_ERROR_OUT_OF_MEMORY */, 1);
        assert_failure(compile_to(rt, TF_COMPILE_CUBIN, &p), TF_ERROR_PROVIDER,
                       "tf_program_compile", entries[i], "(1)");
        assert_string_equal(tf_last_error_call(), entries[i]);
        assert_null(p);
        assert_int_equal(tfd()->tfd_live(TFD_NVRTC_PROGRAMS), 0); /* destroyed anyway */
    }
    assert_ok(tf_runtime_release(rt));
}

/* A program NVRTC refuses to destroy is leaked and logged; the compile
 * result stands. */
static void program_destroy_failure_is_logged(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    tf_program *p = NULL;
    const char *log;
    const void *image = NULL;
    size_t size = 0;
    INJECT("nvrtcDestroyProgram", 1, 3 /* NVRTC_ERROR_INVALID_INPUT */, 1);
    log_capture_start();
    assert_ok(compile_to(rt, TF_COMPILE_PTX, &p));
    log = log_capture_stop();
    assert_non_null(strstr(log, "nvrtcDestroyProgram failed"));
    assert_non_null(strstr(log, "(3)"));
    assert_ok(tf_program_image(p, &image, &size));
    assert_true(size > 0);
    assert_int_equal(tfd()->tfd_live(TFD_NVRTC_PROGRAMS), 1); /* the leak */
    test_leaves_live(TFD_NVRTC_PROGRAMS, 1);
    tf_program_release(p);
    assert_ok(tf_runtime_release(rt));
}

static void function_lookup_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    tf_module *m = NULL;
    void *f = NULL;
    assert_ok(tf_module_load(rt, kPtx, sizeof kPtx, &m));
    INJECT("cuModuleGetFunction", 1, CUDA_ERROR_INVALID_CONTEXT, 1);
    assert_failure(tf_module_function(m, "tfd_fill_u32", &f), TF_ERROR_CUDA, "tf_module_function",
                   "cuModuleGetFunction failed", "CUDA_ERROR_INVALID_CONTEXT (201)");
    assert_null(f);
    assert_null(raw_current_context());
    assert_ok(tf_module_function(m, "tfd_fill_u32", &f));
    assert_non_null(f);
    assert_ok(tf_module_release(m));
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(tfd()->tfd_live(TFD_MODULES), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(cublas_status_without_names),       TF_TEST(cublas_version_query_failure),
        TF_TEST(nvrtc_result_without_names),        TF_TEST(cubin_output_failures),
        TF_TEST(program_destroy_failure_is_logged), TF_TEST(function_lookup_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
