// SPDX-License-Identifier: MIT OR Apache-2.0
// Run-time compilation with NVRTC: tf_program_compile and the program's
// image and log.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/guard.h"
#include "driver/nvrtc_library.h"
#include "runtime/program.h"
#include "util/log.h"
#include "util/struct_io.h"

namespace {

constexpr size_t kOptionsMinSize = offsetof(tf_compile_options, target) + sizeof(int32_t);

tf_status read_options(const tf_compile_options *in, tf_compile_options *out) {
    tf_compile_options_init(out, sizeof *out);
    if (!in) return TF_OK;
    tf_status st = tf::check_struct_size("options", in->struct_size, kOptionsMinSize,
                                         "tf_compile_options_init");
    if (st != TF_OK) return st;
    if (!tf::copy_in_sized(in, out))
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "options set fields this library (version %s) does not know",
                       TF_VERSION_STRING);
    if (out->target != TF_COMPILE_PTX && out->target != TF_COMPILE_CUBIN)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "target %d is neither TF_COMPILE_PTX (0) nor TF_COMPILE_CUBIN (1)",
                       static_cast<int>(out->target));
    if (out->arch < 0 || out->option_count < 0)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "arch %d and option_count %d must not be negative",
                       static_cast<int>(out->arch), static_cast<int>(out->option_count));
    if (out->option_count > 0 && !out->options)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "options->options is NULL with option_count %d",
                       static_cast<int>(out->option_count));
    for (int32_t i = 0; i < out->option_count; ++i)
        if (!out->options[i])
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "options->options[%d] is NULL",
                           static_cast<int>(i));
    return TF_OK;
}

bool names_arch(const char *option) {
    return std::strncmp(option, "-arch", 5) == 0 ||
           std::strncmp(option, "--gpu-architecture", 18) == 0;
}

// The caller's options plus, unless they name one, the architecture.
std::vector<const char *> nvrtc_options(const tf_compile_options &o, int device_arch,
                                        std::string *arch_option) {
    std::vector<const char *> all(o.options, o.options + o.option_count);
    for (const char *opt : all)
        if (names_arch(opt)) return all;
    const int arch = o.arch ? o.arch : device_arch;
    *arch_option = std::string("--gpu-architecture=") +
                   (o.target == TF_COMPILE_CUBIN ? "sm_" : "compute_") + std::to_string(arch);
    all.push_back(arch_option->c_str());
    return all;
}

// Destroys the NVRTC program on every exit path; a refusal leaks it (host
// memory only) and is logged, since the call's own result stands.
struct ProgramGuard {
    const tf::NvrtcApi &api;
    nvrtcProgram prog;
    ~ProgramGuard() {
        nvrtcResult r = api.destroy(&prog);
        if (r != NVRTC_SUCCESS)
            tf::log(TF_LOG_WARNING,
                    "tf_program_compile: nvrtcDestroyProgram failed: %s (%d); "
                    "the NVRTC program is leaked",
                    tf::nvrtc_result_name(api, r), static_cast<int>(r));
    }
};

// One NVRTC output (the log, PTX or CUBIN) and its size/copy pair.
template <class SizeFn, class CopyFn>
struct Output {
    SizeFn size;
    const char *size_name;
    CopyFn copy;
    const char *copy_name;
};

template <class SizeFn, class CopyFn>
Output<SizeFn, CopyFn> output(SizeFn size, const char *size_name, CopyFn copy,
                              const char *copy_name) {
    return {size, size_name, copy, copy_name};
}

// Reads an output into `out` (keeping the NUL NVRTC writes); on failure
// records it as TF_ERROR_PROVIDER, naming the call that failed.
template <class O>
tf_status read_output(const tf::NvrtcApi &api, nvrtcProgram prog, const O &o,
                      std::vector<char> *out) {
    size_t n = 0;
    nvrtcResult r = o.size(prog, &n);
    if (r != NVRTC_SUCCESS) return tf::fail_nvrtc(api, TF_ERROR_PROVIDER, o.size_name, r);
    out->assign(n > 0 ? n : 1, '\0');
    if (n > 0 && (r = o.copy(prog, out->data())) != NVRTC_SUCCESS)
        return tf::fail_nvrtc(api, TF_ERROR_PROVIDER, o.copy_name, r);
    return TF_OK;
}

tf_status compile(const tf::NvrtcApi &api, const char *source, const tf_compile_options &o,
                  int device_arch, std::unique_ptr<tf_program> *out) {
    nvrtcProgram prog = nullptr;
    nvrtcResult r =
        api.create(&prog, source, o.name ? o.name : "tenferro_program.cu", 0, nullptr, nullptr);
    if (r != NVRTC_SUCCESS)
        return tf::fail_nvrtc(
            api, r == NVRTC_ERROR_OUT_OF_MEMORY ? TF_ERROR_OUT_OF_MEMORY : TF_ERROR_PROVIDER,
            "nvrtcCreateProgram", r);
    ProgramGuard guard{api, prog};
    std::string arch_option;
    std::vector<const char *> options = nvrtc_options(o, device_arch, &arch_option);
    nvrtcResult compiled = api.compile(prog, static_cast<int>(options.size()), options.data());
    std::vector<char> log;
    tf_status st = read_output(
        api, prog, output(api.log_size, "nvrtcGetProgramLogSize", api.log, "nvrtcGetProgramLog"),
        &log);
    if (st != TF_OK) return st;
    std::unique_ptr<tf_program> p(new tf_program);
    p->log.assign(log.data());
    if (compiled == NVRTC_ERROR_COMPILATION || compiled == NVRTC_ERROR_INVALID_OPTION) {
        *out = std::move(p);
        const std::string &text = (*out)->log;
        return tf::fail(TF_ERROR_COMPILE, "nvrtcCompileProgram", TF_CODE_NVRTC, compiled,
                        "NVRTC rejected the program: %s (%d); the whole log is in the returned "
                        "program (tf_program_log); it starts: %.300s",
                        tf::nvrtc_result_name(api, compiled), static_cast<int>(compiled),
                        text.c_str());
    }
    if (compiled != NVRTC_SUCCESS)
        return tf::fail_nvrtc(api, TF_ERROR_PROVIDER, "nvrtcCompileProgram", compiled);
    st = o.target == TF_COMPILE_CUBIN
             ? read_output(api, prog,
                           output(api.cubin_size, "nvrtcGetCUBINSize", api.cubin, "nvrtcGetCUBIN"),
                           &p->image)
             : read_output(api, prog,
                           output(api.ptx_size, "nvrtcGetPTXSize", api.ptx, "nvrtcGetPTX"),
                           &p->image);
    if (st == TF_OK) *out = std::move(p);
    return st;
}

// Both releases, each under its own name.
tf_status release_program(const char *op, tf_program *program) {
    return tf::release_handle(op, program, tf::kProgramKind, [](tf_program *dead) {
        std::string().swap(dead->log);
        std::vector<char>().swap(dead->image);
    });
}

}  // namespace

extern "C" {

TF_API void tf_compile_options_init(tf_compile_options *options, size_t struct_size) {
    tf_compile_options d;
    std::memset(&d, 0, sizeof d);
    d.target = TF_COMPILE_PTX;
    tf::init_sized(options, struct_size, d);
}

TF_API tf_status tf_program_compile(tf_runtime *rt, const char *source,
                                    const tf_compile_options *options, tf_program **out) {
    static const char op[] = "tf_program_compile";
    return tf::runtime_query(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!source) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "source is NULL");
        if (!out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out is NULL");
        tf_compile_options o;
        tf_status st = read_options(options, &o);
        if (st != TF_OK) return st;
        const tf::NvrtcApi *api = tf::load_nvrtc();
        if (!api) return tf::current_error().status;
        const tf_device_properties &dev = state.info();
        std::unique_ptr<tf_program> program;
        st = compile(*api, source, o,
                     dev.compute_capability_major * 10 + dev.compute_capability_minor, &program);
        if (program) *out = program.release();  // TF_OK and TF_ERROR_COMPILE
        return st;
    });
}

TF_API tf_status tf_program_image(const tf_program *program, const void **out_image,
                                  size_t *out_size) {
    static const char op[] = "tf_program_image";
    return tf::guarded(op, [&]() -> tf_status {
        if (!program || !out_image || !out_size)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "program, out_image or out_size is NULL");
        tf_status st = tf::check_handle(tf::kProgramKind, program);
        if (st != TF_OK) return st;
        if (program->image.empty())
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                           "the program did not compile, so it has no image; see tf_program_log");
        *out_image = program->image.data();
        *out_size = program->image.size();
        return TF_OK;
    });
}

TF_API tf_status tf_program_log(const tf_program *program, const char **out_log) {
    static const char op[] = "tf_program_log";
    return tf::guarded(op, [&]() -> tf_status {
        if (!program || !out_log)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "program or out_log is NULL");
        tf_status st = tf::check_handle(tf::kProgramKind, program);
        if (st != TF_OK) return st;
        *out_log = program->log.c_str();
        return TF_OK;
    });
}

TF_API tf_status tf_program_retain(tf_program *program) {
    return tf::retain_handle("tf_program_retain", program, tf::kProgramKind);
}

TF_API tf_status tf_program_release_checked(tf_program *program) {
    return release_program("tf_program_release_checked", program);
}

TF_API void tf_program_release(tf_program *program) {
    // The 1.0 release returns nothing: a refusal stays in the last error.
    static_cast<void>(release_program("tf_program_release", program));
}

}  // extern "C"
