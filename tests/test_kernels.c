/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Kernels: PTX, CUBIN and fatbin images loaded into the runtime's primary
 * context, functions launched on the caller's slot stream, NVRTC compiling
 * CUDA C++ for the runtime's device; every failure reported with the JIT or
 * compile log; modules holding their runtime and unloading in its context.
 *
 * The PTX and the CUDA C++ below are real kernels for a GPU; the driver
 * double knows the same names (tfd_fill_u32, tfd_add_f32) as built-ins and
 * runs them on host memory, so every test that does not inject a failure
 * runs on both. */
#include <nvrtc.h>
#include <stdlib.h>
#include <string.h>

#include "support/kernels.h"
#include "support/raw_memory.h"
#include "support/test_support.h"

static const char kSource[] =
    "extern \"C\" __global__ void tfd_add_f32(const float *x, const float *y, float *out,\n"
    "                                         unsigned n) {\n"
    "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) out[i] = x[i] + y[i];\n"
    "}\n";

static void require_nvrtc(tf_runtime *rt) {
    int32_t yes = 0;
    assert_ok(tf_runtime_supports(rt, TF_CAP_RUNTIME_COMPILATION, &yes));
    if (!yes) {
        print_message("    (NVRTC cannot be loaded here: add it to LD_LIBRARY_PATH; skipped)\n");
        tf_runtime_release(rt);
        skip();
    }
}

static tf_launch_config blocks_for(uint32_t n) {
    tf_launch_config c;
    tf_launch_config_init(&c, sizeof c);
    c.block_x = 256;
    c.grid_x = (n + 255) / 256;
    return c;
}

/* Launches add(x, y) on the slot stream and checks the result. */
static void check_add(tf_runtime *rt, void *add, uint32_t n) {
    float *x = malloc(n * 4), *y = malloc(n * 4), *out = malloc(n * 4);
    uint64_t dx = dev_alloc(rt, n * 4), dy = dev_alloc(rt, n * 4), dout = dev_alloc(rt, n * 4);
    tf_launch_config c = blocks_for(n);
    void *args[4];
    uint32_t i;
    for (i = 0; i < n; ++i) x[i] = (float)i * 0.5f, y[i] = 1000.0f - (float)i;
    dev_upload(rt, dx, x, n * 4);
    dev_upload(rt, dy, y, n * 4);
    args[0] = &dx, args[1] = &dy, args[2] = &dout, args[3] = &n;
    assert_ok(tf_kernel_launch(rt, add, &c, args));
    dev_download(rt, out, dout, n * 4);
    for (i = 0; i < n; ++i)
        if (out[i] != x[i] + y[i]) fail_msg("out[%u] = %g, expected %g", i, out[i], x[i] + y[i]);
    dev_free(rt, dx), dev_free(rt, dy), dev_free(rt, dout);
    free(x), free(y), free(out);
}

static void ptx_kernels_run_on_the_slot_stream(void **state) {
    tf_runtime *rt = new_runtime();
    tf_module *m = NULL;
    void *fill = NULL, *add = NULL, *other = raw_create_context();
    uint32_t n = 1000, value = 0xC0FFEE, i, *host = malloc(1000 * 4);
    uint64_t d;
    tf_launch_config c = blocks_for(n);
    void *args[3];
    long modules = tfd() ? tfd()->tfd_live(TFD_MODULES) : 0;
    (void)state;
    raw_set_current_context(other);
    /* Without its NUL byte: the library terminates the text itself. */
    assert_ok(tf_module_load(rt, kTestKernelsPtx, strlen(kTestKernelsPtx), &m));
    assert_ok(tf_module_function(m, "tfd_fill_u32", &fill));
    assert_ok(tf_module_function(m, "tfd_add_f32", &add));
    assert_non_null(fill);
    assert_ptr_equal(raw_current_context(), other);
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_MODULES), modules + 1);
    d = dev_alloc(rt, n * 4);
    args[0] = &d, args[1] = &value, args[2] = &n;
    assert_ok(tf_kernel_launch(rt, fill, &c, args));
    assert_ptr_equal(raw_current_context(), other);
    dev_download(rt, host, d, n * 4);
    for (i = 0; i < n; ++i) assert_int_equal(host[i], value);
    check_add(rt, add, 4097);
    dev_free(rt, d);
    assert_ok(tf_module_release(m));
    assert_ptr_equal(raw_current_context(), other);
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_MODULES), modules);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    free(host);
    assert_ok(tf_runtime_release(rt));
}

/* The module keeps the runtime; its last release unloads it in the runtime's
 * context and then lets the runtime go. */
static void module_keeps_its_runtime(void **state) {
    tf_runtime *rt = new_runtime();
    tf_module *m = NULL;
    void *fill = NULL;
    (void)state;
    assert_ok(tf_module_load(rt, kTestKernelsPtx, sizeof kTestKernelsPtx, &m));
    assert_ok(tf_module_retain(m));
    assert_ok(tf_runtime_release(rt));
    if (tfd()) assert_int_equal(tfd()->tfd_primary_refcount(0), 1);
    assert_ok(tf_module_function(m, "tfd_fill_u32", &fill));
    assert_ok(tf_module_release(m));
    assert_ok(tf_module_release(m));
    if (tfd()) {
        assert_int_equal(tfd()->tfd_primary_refcount(0), 0);
        assert_int_equal(tfd()->tfd_calls("cuModuleUnload"), 1);
        assert_int_equal(tfd()->tfd_reclaimed(TFD_MODULES), 0);
    }
    assert_null(raw_current_context());
}

static void module_bad_arguments(void **state) {
    tf_runtime *rt = new_runtime();
    tf_module *m = NULL;
    void *f = NULL;
    uint64_t junk[8];
    (void)state;
    memset(junk, 0, sizeof junk);
    assert_failure(tf_module_load(rt, NULL, 10, &m), TF_ERROR_INVALID_ARGUMENT, "tf_module_load",
                   "image or out is NULL");
    assert_failure(tf_module_load(rt, kTestKernelsPtx, 0, &m), TF_ERROR_INVALID_ARGUMENT,
                   "tf_module_load", "size is 0");
    assert_null(m);
    assert_failure(tf_module_function(NULL, "x", &f), TF_ERROR_INVALID_ARGUMENT,
                   "tf_module_function", "module is NULL");
    assert_failure(tf_module_function((tf_module *)junk, "x", &f), TF_ERROR_INVALID_ARGUMENT,
                   "tf_module_function", "is not a live module");
    assert_failure(tf_module_release((tf_module *)junk), TF_ERROR_INVALID_ARGUMENT,
                   "tf_module_release", "is not a live module");
    assert_ok(tf_module_release(NULL));
    assert_ok(tf_module_load(rt, kTestKernelsPtx, sizeof kTestKernelsPtx, &m));
    assert_failure(tf_module_function(m, NULL, &f), TF_ERROR_INVALID_ARGUMENT, "tf_module_function",
                   "NULL");
    assert_failure(tf_module_function(m, "no_such_kernel", &f), TF_ERROR_CUDA, "tf_module_function",
                   "CUDA_ERROR_NOT_FOUND", "no kernel 'no_such_kernel'", "extern \"C\"");
    assert_null(f);
    assert_ok(tf_module_release(m));
    assert_ok(tf_runtime_release(rt));
}

static void module_load_reports_the_jit_log(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    static const char newer[] =
        ".version 8.0\n.target sm_100\n.address_size 64\n"
        ".visible .entry tfd_fill_u32(\n)\n{\n\tret;\n}\n";
    tf_runtime *rt = new_runtime();
    tf_module *m = NULL;
    void *other = raw_create_context();
    raw_set_current_context(other);
    assert_failure(tf_module_load(rt, newer, sizeof newer, &m), TF_ERROR_CUDA, "tf_module_load",
                   "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218)", "JIT log",
                   "SM version specified by .target is higher");
    assert_null(m);
    INJECT("cuModuleLoadDataEx", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
    assert_failure(tf_module_load(rt, kTestKernelsPtx, sizeof kTestKernelsPtx, &m),
                   TF_ERROR_OUT_OF_MEMORY, "tf_module_load", "CUDA_ERROR_OUT_OF_MEMORY (2)");
    assert_null(m);
    assert_ptr_equal(raw_current_context(), other);
    assert_int_equal(tfd()->tfd_live(TFD_MODULES), 0);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    assert_ok(tf_runtime_release(rt));
}

static void launch_failures(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    tf_module *m = NULL;
    void *fill = NULL, *other = raw_create_context();
    tf_launch_config c;
    uint64_t d = 0;
    uint32_t value = 1, n = 1;
    void *args[3];
    args[0] = &d, args[1] = &value, args[2] = &n;
    assert_ok(tf_module_load(rt, kTestKernelsPtx, sizeof kTestKernelsPtx, &m));
    assert_ok(tf_module_function(m, "tfd_fill_u32", &fill));
    tf_launch_config_init(&c, sizeof c);
    c.grid_y = 0;
    assert_failure(tf_kernel_launch(rt, fill, &c, args), TF_ERROR_INVALID_ARGUMENT,
                   "tf_kernel_launch", "grid 1x0x1", "at least 1");
    assert_failure(tf_kernel_launch(rt, NULL, &c, args), TF_ERROR_INVALID_ARGUMENT,
                   "tf_kernel_launch", "NULL");
    c.grid_y = 1;
    c.struct_size = 4;
    assert_failure(tf_kernel_launch(rt, fill, &c, args), TF_ERROR_INVALID_ARGUMENT,
                   "tf_kernel_launch", "struct_size 4 is too small");
    tf_launch_config_init(&c, sizeof c);
    raw_set_current_context(other);
    INJECT("cuLaunchKernel", 1, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 1);
    assert_failure(tf_kernel_launch(rt, fill, &c, args), TF_ERROR_CUDA, "tf_kernel_launch",
                   "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701)");
    assert_ptr_equal(raw_current_context(), other);
    c.shared_memory_bytes = 64 << 10; /* above the default 48 KiB */
    assert_failure(tf_kernel_launch(rt, fill, &c, args), TF_ERROR_CUDA, "tf_kernel_launch",
                   "CUDA_ERROR_INVALID_VALUE");
    assert_ok(tf_function_set_attribute(m, fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        64 << 10));
    assert_int_equal(
        tfd()->tfd_func_attribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), 64 << 10);
    d = dev_alloc(rt, 4);
    assert_ok(tf_kernel_launch(rt, fill, &c, args));
    INJECT("cuFuncSetAttribute", 1, CUDA_ERROR_INVALID_VALUE, 1);
    assert_failure(tf_function_set_attribute(m, fill, 8, 0), TF_ERROR_CUDA,
                   "tf_function_set_attribute", "cuFuncSetAttribute failed");
    assert_failure(tf_function_set_attribute(m, NULL, 8, 0), TF_ERROR_INVALID_ARGUMENT,
                   "tf_function_set_attribute", "function is NULL");
    assert_ptr_equal(raw_current_context(), other);
    raw_set_current_context(NULL);
    raw_destroy_context(other);
    dev_free(rt, d);
    /* An unload failure is logged, not returned. */
    INJECT("cuModuleUnload", 1, CUDA_ERROR_INVALID_HANDLE, 1);
    log_capture_start();
    assert_ok(tf_module_release(m));
    assert_non_null(strstr(log_capture_stop(), "tf_module_release: cuModuleUnload failed"));
    assert_ok(tf_runtime_release(rt));
}

/* A kernel that faults: the launch succeeds, the next wait reports the
 * fault, the runtime refuses from then on, the module leaks quietly. */
static void faulting_kernel_poisons_the_runtime(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    static const char bad[] =
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        ".visible .entry tfd_illegal_address(\n)\n{\n\tret;\n}\n";
    tf_runtime *rt = new_runtime();
    tf_module *m = NULL;
    void *f = NULL;
    tf_launch_config c;
    tf_launch_config_init(&c, sizeof c);
    assert_ok(tf_module_load(rt, bad, sizeof bad, &m));
    assert_ok(tf_module_function(m, "tfd_illegal_address", &f));
    assert_ok(tf_kernel_launch(rt, f, &c, NULL));
    assert_failure(tf_runtime_sync(rt), TF_ERROR_DEVICE_FAULT, "tf_runtime_sync",
                   "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    assert_failure(tf_kernel_launch(rt, f, &c, NULL), TF_ERROR_DEVICE_FAULT, "tf_kernel_launch",
                   "unusable");
    assert_failure(tf_module_function(m, "tfd_illegal_address", &f), TF_ERROR_DEVICE_FAULT,
                   "tf_module_function", "unusable");
    log_capture_start();
    assert_ok(tf_module_release(m));
    assert_string_equal(log_capture_stop(), "");
    assert_int_equal(tfd()->tfd_calls("cuModuleUnload"), 0);
    assert_ok(tf_runtime_release(rt));
}

/* ---- NVRTC ----------------------------------------------------------------- */

static tf_program *compile_ok(tf_runtime *rt, int target) {
    tf_compile_options o;
    tf_program *p = NULL;
    tf_compile_options_init(&o, sizeof o);
    o.target = target;
    o.name = "add.cu";
    assert_ok(tf_program_compile(rt, kSource, &o, &p));
    assert_non_null(p);
    return p;
}

static void compiled_kernel_runs(void **state) {
    tf_runtime *rt = new_runtime();
    int target;
    (void)state;
    require_nvrtc(rt);
    for (target = TF_COMPILE_PTX; target <= TF_COMPILE_CUBIN; ++target) {
        tf_program *p = compile_ok(rt, target);
        const void *image = NULL;
        size_t size = 0;
        const char *log = NULL;
        tf_module *m = NULL;
        void *add = NULL;
        assert_ok(tf_program_image(p, &image, &size));
        assert_true(size > 0);
        assert_ok(tf_program_log(p, &log));
        assert_non_null(log);
        assert_ok(tf_module_load(rt, image, size, &m));
        tf_program_release(p);
        assert_ok(tf_module_function(m, "tfd_add_f32", &add));
        check_add(rt, add, 3001);
        assert_ok(tf_module_release(m));
    }
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

static void compile_error_returns_the_log(void **state) {
    static const char broken[] =
        "extern \"C\" __global__ void k() {}\n#error boom from the source\n";
    tf_runtime *rt = new_runtime();
    tf_program *p = NULL;
    const char *log = NULL;
    const void *image = NULL;
    size_t size = 0;
    (void)state;
    require_nvrtc(rt);
    assert_failure(tf_program_compile(rt, broken, NULL, &p), TF_ERROR_COMPILE, "tf_program_compile",
                   "NVRTC_ERROR_COMPILATION (6)", "tf_program_log", "boom from the source");
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_NVRTC);
    assert_int_equal(tf_last_error_code(), 6);
    assert_non_null(p);
    assert_ok(tf_program_log(p, &log));
    assert_non_null(strstr(log, "boom from the source"));
    assert_failure(tf_program_image(p, &image, &size), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_image", "did not compile");
    tf_program_release(p);
    tf_program_release(NULL);
    if (tfd()) assert_int_equal(tfd()->tfd_live(TFD_NVRTC_PROGRAMS), 0);
    assert_ok(tf_runtime_release(rt));
}

/* Programs follow the one handle model (1.1): counted references, and a
 * released program passed back is TF_ERROR_INVALID_HANDLE. */
static void program_references_and_released_programs(void **state) {
    tf_runtime *rt = new_runtime();
    tf_program *p = NULL;
    const void *image = NULL;
    size_t size = 0;
    const char *log = NULL;
    uint64_t junk[8];
    (void)state;
    require_nvrtc(rt);
    assert_ok(tf_program_compile(rt, kSource, NULL, &p));
    assert_ok(tf_program_retain(p));
    assert_ok(tf_program_release_checked(p)); /* one reference left: still whole */
    assert_ok(tf_program_image(p, &image, &size));
    assert_true(size > 0);
    assert_ok(tf_program_log(p, &log));
    assert_ok(tf_program_release_checked(p)); /* the last */
    /* Used after its last release, and released twice. */
    assert_failure(tf_program_image(p, &image, &size), TF_ERROR_INVALID_HANDLE, "tf_program_image",
                   "program", "was already released");
    assert_failure(tf_program_log(p, &log), TF_ERROR_INVALID_HANDLE, "tf_program_log",
                   "was already released");
    assert_failure(tf_program_retain(p), TF_ERROR_INVALID_HANDLE, "tf_program_retain",
                   "was already released");
    assert_failure(tf_program_release_checked(p), TF_ERROR_INVALID_HANDLE,
                   "tf_program_release_checked", "was already released");
    /* The 1.0 release refuses the same way; the refusal is in the record. */
    tf_clear_last_error();
    tf_program_release(p);
    assert_int_equal(tf_last_error_status(), TF_ERROR_INVALID_HANDLE);
    assert_string_equal(tf_last_error_operation(), "tf_program_release");
    /* NULL, and a pointer that never was a program. */
    assert_ok(tf_program_release_checked(NULL));
    assert_failure(tf_program_retain(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_program_retain",
                   "program is NULL");
    memset(junk, 0x5A, sizeof junk);
    assert_failure(tf_program_retain((tf_program *)junk), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_retain", "is not a live program");
    assert_failure(tf_program_release_checked((tf_program *)junk), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_release_checked", "is not a live program");
    assert_failure(tf_program_image((tf_program *)junk, &image, &size), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_image", "is not a live program");
    assert_failure(tf_program_log((tf_program *)junk, &log), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_log", "is not a live program");
    assert_ok(tf_runtime_release(rt));
}

/* The image the double's NVRTC made, as text, for its .target line. */
static void compile_and_expect_target(tf_runtime *rt, const tf_compile_options *o,
                                      const char *target) {
    tf_program *p = NULL;
    const void *image = NULL;
    size_t size = 0;
    assert_ok(tf_program_compile(rt, kSource, o, &p));
    assert_ok(tf_program_image(p, &image, &size));
    if (!strstr((const char *)image, target))
        fail_msg("image lacks '%s':\n%s", target, (const char *)image);
    tf_program_release(p);
}

static void architecture_comes_from_the_device_or_the_options(void **state) {
    tf_runtime *rt = NULL;
    tf_compile_options o;
    const char *own_arch[] = {"-arch=compute_75"};
    const char *bad_arch[] = {"--gpu-architecture=compute_1"};
    tf_program *p = NULL;
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_attribute(-1, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 8);
    tfd()->tfd_set_attribute(-1, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 6);
    assert_ok(tf_runtime_new(0, &rt));
    compile_and_expect_target(rt, NULL, ".target sm_86");
    tf_compile_options_init(&o, sizeof o);
    o.arch = 80;
    compile_and_expect_target(rt, &o, ".target sm_80");
    o.options = own_arch, o.option_count = 1; /* the caller's -arch wins */
    compile_and_expect_target(rt, &o, ".target sm_75");
    o.options = bad_arch;
    assert_failure(tf_program_compile(rt, kSource, &o, &p), TF_ERROR_COMPILE, "tf_program_compile",
                   "NVRTC_ERROR_INVALID_OPTION (5)", "invalid value");
    assert_non_null(p);
    tf_program_release(p);
    assert_ok(tf_runtime_release(rt));
}

static void compile_bad_arguments(void **state) {
    tf_runtime *rt = new_runtime();
    tf_compile_options o;
    tf_program *p = NULL;
    const char *with_null[] = {NULL};
    (void)state;
    assert_failure(tf_program_compile(rt, NULL, NULL, &p), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_compile", "source is NULL");
    assert_failure(tf_program_compile(rt, kSource, NULL, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_compile", "out is NULL");
    tf_compile_options_init(&o, sizeof o);
    o.target = 2;
    assert_failure(tf_program_compile(rt, kSource, &o, &p), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_compile", "target 2");
    tf_compile_options_init(&o, sizeof o);
    o.option_count = -1;
    assert_failure(tf_program_compile(rt, kSource, &o, &p), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_compile", "must not be negative");
    o.option_count = 1;
    assert_failure(tf_program_compile(rt, kSource, &o, &p), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_compile", "options->options is NULL");
    o.options = with_null;
    assert_failure(tf_program_compile(rt, kSource, &o, &p), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_compile", "options->options[0] is NULL");
    o.struct_size = 2;
    assert_failure(tf_program_compile(rt, kSource, &o, &p), TF_ERROR_INVALID_ARGUMENT,
                   "tf_program_compile", "struct_size 2 is too small");
    assert_null(p);
    assert_failure(tf_program_log(NULL, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_program_log", "NULL");
    assert_ok(tf_runtime_release(rt));
}

static void check_nvrtc_failure(tf_runtime *rt, const char *entry, int code, tf_status expected) {
    tf_program *p = NULL;
    INJECT(entry, 1, code, 1);
    assert_failure(tf_program_compile(rt, kSource, NULL, &p), expected, "tf_program_compile",
                   entry);
    assert_string_equal(tf_last_error_call(), entry);
    assert_int_equal(tf_last_error_code_domain(), TF_CODE_NVRTC);
    assert_null(p);
    assert_int_equal(tfd()->tfd_live(TFD_NVRTC_PROGRAMS), 0);
}

static void nvrtc_failures(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    check_nvrtc_failure(rt, "nvrtcCreateProgram", NVRTC_ERROR_OUT_OF_MEMORY,
                        TF_ERROR_OUT_OF_MEMORY);
    check_nvrtc_failure(rt, "nvrtcCreateProgram", NVRTC_ERROR_PROGRAM_CREATION_FAILURE,
                        TF_ERROR_PROVIDER);
    check_nvrtc_failure(rt, "nvrtcCompileProgram", NVRTC_ERROR_INTERNAL_ERROR, TF_ERROR_PROVIDER);
    check_nvrtc_failure(rt, "nvrtcGetProgramLogSize", NVRTC_ERROR_INVALID_PROGRAM,
                        TF_ERROR_PROVIDER);
    check_nvrtc_failure(rt, "nvrtcGetProgramLog", NVRTC_ERROR_INVALID_INPUT, TF_ERROR_PROVIDER);
    check_nvrtc_failure(rt, "nvrtcGetPTXSize", NVRTC_ERROR_INVALID_PROGRAM, TF_ERROR_PROVIDER);
    check_nvrtc_failure(rt, "nvrtcGetPTX", NVRTC_ERROR_INVALID_INPUT, TF_ERROR_PROVIDER);
    assert_ok(tf_runtime_release(rt));
}

/* The module of `source` compiled with NVRTC's defaults (skips without
 * NVRTC). */
static tf_module *load_compiled(tf_runtime *rt, const char *source) {
    tf_program *p = NULL;
    tf_module *m = NULL;
    const void *image = NULL;
    size_t size = 0;
    require_nvrtc(rt);
    assert_ok(tf_program_compile(rt, source, NULL, &p));
    assert_ok(tf_program_image(p, &image, &size));
    assert_ok(tf_module_load(rt, image, size, &m));
    tf_program_release(p);
    return m;
}

/* A kernel without extern "C" has a mangled name: looking it up by its
 * plain name fails with a hint. */
static void cxx_kernel_name_is_mangled(void **state) {
    static const char cxx[] = "__global__ void scale(float *x) { x[threadIdx.x] *= 2.0f; }\n";
    tf_runtime *rt = new_runtime();
    tf_module *m = load_compiled(rt, cxx);
    void *f = NULL;
    (void)state;
    assert_failure(tf_module_function(m, "scale", &f), TF_ERROR_CUDA, "tf_module_function",
                   "extern \"C\"");
    assert_ok(tf_module_release(m));
    assert_ok(tf_runtime_release(rt));
}

/* A kernel declared extern "C" keeps its name.  A GPU runs any of them;
 * the driver double runs only its built-in kernels and, asked for another
 * one the image declares, says which it runs instead of hinting at C++
 * names (getting-started's kernel example, "add", on the double). */
static void extern_c_kernel_the_double_cannot_run(void **state) {
    static const char add[] =
        "extern \"C\" __global__ void add(const float *x, const float *y, float *out,\n"
        "                                 unsigned n) {\n"
        "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) out[i] = x[i] + y[i];\n"
        "}\n";
    tf_runtime *rt = new_runtime();
    tf_module *m = load_compiled(rt, add);
    void *f = NULL;
    tf_status st = tf_module_function(m, "add", &f);
    (void)state;
    if (tfd()) {
        assert_failure(st, TF_ERROR_CUDA, "tf_module_function", "CUDA_ERROR_NO_BINARY_FOR_GPU",
                       "the driver double runs only these kernels: tfd_fill_u32, tfd_add_f32");
        assert_null(strstr(tf_last_error_message(), "extern"));
        assert_null(f);
    } else {
        assert_ok(st);
        assert_non_null(f);
    }
    assert_ok(tf_module_release(m));
    assert_ok(tf_runtime_release(rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(ptx_kernels_run_on_the_slot_stream),
        TF_TEST(module_keeps_its_runtime),
        TF_TEST(module_bad_arguments),
        TF_TEST(module_load_reports_the_jit_log),
        TF_TEST(launch_failures),
        TF_TEST(faulting_kernel_poisons_the_runtime),
        TF_TEST(compiled_kernel_runs),
        TF_TEST(compile_error_returns_the_log),
        TF_TEST(program_references_and_released_programs),
        TF_TEST(architecture_comes_from_the_device_or_the_options),
        TF_TEST(compile_bad_arguments),
        TF_TEST(nvrtc_failures),
        TF_TEST(cxx_kernel_name_is_mangled),
        TF_TEST(extern_c_kernel_the_double_cannot_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
