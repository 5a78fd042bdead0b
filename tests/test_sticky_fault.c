/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* A sticky device fault: a kernel writes an illegal address.  Every later
 * call on the runtime reports TF_ERROR_DEVICE_FAULT with the original cause,
 * the last release leaks quietly, and the process exits normally.
 *
 * On the H200 the kernel really stores to an unmapped address; the driver
 * double knows the kernel's name and poisons the context with the same code
 * (CUDA_ERROR_ILLEGAL_ADDRESS).  The fault ruins the device's primary
 * context for the whole process, so it runs in a child process. */
#include <stdio.h>
#include <string.h>

#include "support/test_support.h"

static const char kIllegalStore[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry tfd_illegal_address()\n"
    "{\n"
    "\t.reg .b64 %rd<2>;\n"
    "\t.reg .b32 %r<2>;\n"
    "\tmov.u64 %rd1, 4096;\n"
    "\tmov.u32 %r1, 7;\n"
    "\tst.global.u32 [%rd1], %r1;\n"
    "\tret;\n"
    "}\n";

static int32_t noop(void *user_data) {
    (void)user_data;
    return 0;
}

static int32_t noop_cublas(void *handle, void *stream, void *user_data) {
    (void)handle;
    (void)stream;
    (void)user_data;
    return 0;
}

static char warnings[4096];
static void collect(int32_t level, const char *message, void *user_data) {
    (void)level;
    (void)user_data;
    strncat(warnings, message, sizeof warnings - strlen(warnings) - 2);
    strcat(warnings, "\n");
}

/* Exit 0 only if every check holds; otherwise the line of the first that did
 * not (a distinct exit status per check). */
static int fault_then_refuse_then_leak_quietly(void) {
    tf_runtime *rt = NULL;
    tf_module *m = NULL;
    void *f = NULL, *stream = NULL;
    tf_launch_config c;
    uint64_t dev = 0, got = 0;
    SCENARIO_CHECK(tf_runtime_new(0, &rt) == TF_OK);
    SCENARIO_CHECK(tf_alloc(rt, 64, &dev) == TF_OK);
    SCENARIO_CHECK(tf_module_load(rt, kIllegalStore, sizeof kIllegalStore, &m) == TF_OK);
    SCENARIO_CHECK(tf_module_function(m, "tfd_illegal_address", &f) == TF_OK);
    tf_launch_config_init(&c, sizeof c);
    SCENARIO_CHECK(tf_kernel_launch(rt, f, &c, NULL) == TF_OK);
    /* The fault surfaces at the next wait. */
    SCENARIO_CHECK(tf_runtime_sync(rt) == TF_ERROR_DEVICE_FAULT);
    SCENARIO_CHECK(tf_last_error_code() == CUDA_ERROR_ILLEGAL_ADDRESS);
    SCENARIO_CHECK(strstr(tf_last_error_message(), "CUDA_ERROR_ILLEGAL_ADDRESS (700)") != NULL);
    /* From now on every call that touches the device refuses, naming the cause. */
    SCENARIO_CHECK(tf_with_context(rt, noop, NULL) == TF_ERROR_DEVICE_FAULT);
    SCENARIO_CHECK(strstr(tf_last_error_message(), "unusable") != NULL);
    SCENARIO_CHECK(strstr(tf_last_error_message(), "(700)") != NULL);
    SCENARIO_CHECK(tf_runtime_stream(rt, &stream) == TF_ERROR_DEVICE_FAULT);
    SCENARIO_CHECK(tf_download_scalar(rt, dev, &got, 4) == TF_ERROR_DEVICE_FAULT);
    SCENARIO_CHECK(tf_upload(rt, &got, dev, 4) == TF_ERROR_DEVICE_FAULT);
    SCENARIO_CHECK(tf_cublas_enqueue(rt, TF_CUBLAS_POINTER_MODE_HOST, noop_cublas, NULL) ==
                   TF_ERROR_DEVICE_FAULT);
    SCENARIO_CHECK(tf_kernel_launch(rt, f, &c, NULL) == TF_ERROR_DEVICE_FAULT);
    SCENARIO_CHECK(tf_runtime_sync(rt) == TF_ERROR_DEVICE_FAULT);
    SCENARIO_CHECK(raw_current_context() == NULL);
    /* Releasing everything leaks quietly: no warning. */
    SCENARIO_CHECK(tf_set_log_callback(collect, NULL) == TF_OK);
    /* refused too; the memory goes with the context */
    SCENARIO_CHECK(tf_free(rt, dev) == TF_ERROR_DEVICE_FAULT);
    SCENARIO_CHECK(tf_module_release(m) == TF_OK);
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    if (warnings[0]) {
        fprintf(stderr, "teardown after a fault was not quiet:\n%s", warnings);
        return 90;
    }
    return 0;
}

static const struct child_scenario scenarios[] = {
    {"fault_then_refuse_then_leak_quietly", fault_then_refuse_then_leak_quietly}, {NULL, NULL}};

static void illegal_address_is_sticky_and_quiet(void **state) {
    int rc;
    (void)state;
    rc = run_child("fault_then_refuse_then_leak_quietly", NULL);
    if (rc != 0) fail_msg("the child exited with %d (a failed check's line, or a crash)", rc);
}

/* Every CUresult the header calls sticky, met by a wait, makes the runtime
 * unusable in the same way: TF_ERROR_DEVICE_FAULT with the CUresult, then
 * every later call refused naming it, and a quiet release.  On the double
 * only: the failure is injected, so the device itself stays healthy and the
 * test runs in this process. */
static const CUresult kSticky[] = {
    CUDA_ERROR_ILLEGAL_ADDRESS,
    CUDA_ERROR_ILLEGAL_INSTRUCTION,
    CUDA_ERROR_MISALIGNED_ADDRESS,
    CUDA_ERROR_INVALID_ADDRESS_SPACE,
    CUDA_ERROR_INVALID_PC,
    CUDA_ERROR_HARDWARE_STACK_ERROR,
    CUDA_ERROR_ASSERT,
    CUDA_ERROR_LAUNCH_FAILED,
    CUDA_ERROR_LAUNCH_TIMEOUT,
    CUDA_ERROR_ECC_UNCORRECTABLE,
};

static void every_sticky_result_makes_the_runtime_unusable(void **state) {
    size_t i;
    (void)state;
    REQUIRE_DOUBLE();
    for (i = 0; i < sizeof kSticky / sizeof kSticky[0]; ++i) {
        tf_runtime *rt = new_runtime();
        void *stream = NULL;
        char code[32];
        const char *log;
        snprintf(code, sizeof code, "(%d)", (int)kSticky[i]);
        assert_ok(tf_runtime_stream(rt, &stream));
        INJECT("cuStreamSynchronize", 1, kSticky[i], 1);
        assert_failure(tf_runtime_sync(rt), TF_ERROR_DEVICE_FAULT, "tf_runtime_sync",
                       "cuStreamSynchronize failed", code);
        assert_int_equal(tf_last_error_code(), kSticky[i]);
        /* the driver would now succeed: the runtime refuses by itself */
        assert_failure(tf_runtime_sync(rt), TF_ERROR_DEVICE_FAULT, "tf_runtime_sync", "unusable",
                       code);
        assert_string_equal(tf_last_error_call(), "");
        assert_failure(tf_with_context(rt, noop, NULL), TF_ERROR_DEVICE_FAULT, "tf_with_context",
                       "unusable");
        assert_int_equal(tfd()->tfd_calls("cuStreamSynchronize"), 1);
        log_capture_start();
        assert_ok(tf_runtime_release(rt));
        log = log_capture_stop();
        assert_string_equal(log, "");
        assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
        tfd()->tfd_reset();
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(illegal_address_is_sticky_and_quiet),
        TF_TEST(every_sticky_result_makes_the_runtime_unusable),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
