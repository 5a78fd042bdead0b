// SPDX-License-Identifier: MIT OR Apache-2.0
// Modules and kernels: tf_module_load / _function / _release,
// tf_function_set_attribute, tf_kernel_launch.
#include <cstring>
#include <memory>
#include <string>

#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/module.h"
#include "util/struct_io.h"

namespace {

constexpr size_t kConfigMinSize =
    offsetof(tf_launch_config, shared_memory_bytes) + sizeof(uint32_t);

template <class Body>
tf_status module_call(const char *op, tf_module *m, Body &&body) {
    return tf::object_call(op, m, tf::kModuleKind, body);
}

// CUBIN images are ELF files and fatbins start with their own magic; the
// driver reads those by their headers.  Anything else is PTX text, which it
// reads up to a NUL byte, so one is added when the caller's copy lacks it.
bool is_binary_image(const unsigned char *p, size_t size) {
    static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
    static const unsigned char fatbin[4] = {0x50, 0xed, 0x55, 0xba};  // 0xBA55ED50, little-endian
    return size >= 4 && (std::memcmp(p, elf, 4) == 0 || std::memcmp(p, fatbin, 4) == 0);
}

tf_status load(const tf::DriverApi &api, const void *image, CUmodule *out) {
    if (!api.cuModuleLoadDataEx) return tf::fail_missing("cuModuleLoadDataEx");
    char log[1024] = {0};
    CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof log))};
    CUresult r = api.cuModuleLoadDataEx(out, image, 2, keys, values);
    if (r == CUDA_SUCCESS) return TF_OK;
    log[sizeof log - 1] = '\0';
    char what[96];
    return tf::fail(tf::status_for_cuda(r), "cuModuleLoadDataEx", TF_CODE_CUDA,
                    static_cast<int32_t>(r), "cuModuleLoadDataEx failed: %s; JIT log: %.300s",
                    tf::describe_cuda(api, r, what, sizeof what), log[0] ? log : "(empty)");
}

}  // namespace

extern "C" {

TF_API tf_status tf_module_load(tf_runtime *rt, const void *image, size_t size, tf_module **out) {
    static const char op[] = "tf_module_load";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!image || !out) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "image or out is NULL");
        if (size == 0) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "size is 0");
        const unsigned char *bytes = static_cast<const unsigned char *>(image);
        std::string terminated;
        if (!is_binary_image(bytes, size) && bytes[size - 1] != '\0') {
            terminated.assign(static_cast<const char *>(image), size);
            image = terminated.c_str();
        }
        std::unique_ptr<tf_module> m(new tf_module(rt->state));
        tf::CallFrame frame(state);
        tf_status st = frame.enter_context();
        if (st != TF_OK) return st;
        if ((st = load(state.api(), image, &m->module)) != TF_OK) return st;
        *out = m.release();
        return TF_OK;
    });
}

TF_API tf_status tf_module_retain(tf_module *module) {
    return tf::retain_handle("tf_module_retain", module, tf::kModuleKind);
}

TF_API tf_status tf_module_release(tf_module *module) {
    return tf::release_shared("tf_module_release", module, tf::kModuleKind, "cuModuleUnload",
                              [](const tf::DriverApi &api, const tf_module &m) {
                                  return api.cuModuleUnload ? api.cuModuleUnload(m.module)
                                                            : CUDA_ERROR_NOT_FOUND;
                              });
}

TF_API tf_status tf_module_function(tf_module *module, const char *name, void **out_function) {
    static const char op[] = "tf_module_function";
    return module_call(op, module, [&](tf::RuntimeState &state) -> tf_status {
        if (!name || !out_function)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "name or out_function is NULL");
        const tf::DriverApi &api = state.api();
        if (!api.cuModuleGetFunction) return tf::fail_missing("cuModuleGetFunction");
        tf::CallFrame frame(state);
        tf_status st = frame.enter_context();
        if (st != TF_OK) return st;
        CUfunction f = nullptr;
        CUresult r = api.cuModuleGetFunction(&f, module->module, name);
        if (r == CUDA_ERROR_NOT_FOUND)
            return tf::fail(TF_ERROR_CUDA, "cuModuleGetFunction", TF_CODE_CUDA,
                            static_cast<int32_t>(r),
                            "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND (%d): the module "
                            "has no kernel '%s': give the name its image declares (a C++ "
                            "kernel's name is mangled unless it is declared extern \"C\")",
                            static_cast<int>(r), name);
        if (r != CUDA_SUCCESS) return tf::fail_cuda(api, "cuModuleGetFunction", r);
        *out_function = f;
        return TF_OK;
    });
}

TF_API tf_status tf_function_set_attribute(tf_module *module, void *function, int32_t attribute,
                                           int32_t value) {
    static const char op[] = "tf_function_set_attribute";
    return module_call(op, module, [&](tf::RuntimeState &state) -> tf_status {
        if (!function) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "function is NULL");
        tf::CallFrame frame(state);
        tf_status st = frame.enter_context();
        if (st != TF_OK) return st;
        return TF_CU(state.api(), cuFuncSetAttribute, static_cast<CUfunction>(function),
                     static_cast<CUfunction_attribute>(attribute), value);
    });
}

TF_API void tf_launch_config_init(tf_launch_config *config, size_t struct_size) {
    tf_launch_config d;
    std::memset(&d, 0, sizeof d);
    d.grid_x = d.grid_y = d.grid_z = 1;
    d.block_x = d.block_y = d.block_z = 1;
    tf::init_sized(config, struct_size, d);
}

TF_API tf_status tf_kernel_launch(tf_runtime *rt, void *function, const tf_launch_config *config,
                                  void **args) {
    static const char op[] = "tf_kernel_launch";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!function || !config)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "function or config is NULL");
        tf_status st = tf::check_struct_size("config", config->struct_size, kConfigMinSize,
                                             "tf_launch_config_init");
        if (st != TF_OK) return st;
        tf_launch_config c;
        tf_launch_config_init(&c, sizeof c);
        if (!tf::copy_in_sized(config, &c))
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                           "config sets fields this library (version %s) does not know",
                           TF_VERSION_STRING);
        if (!c.grid_x || !c.grid_y || !c.grid_z || !c.block_x || !c.block_y || !c.block_z)
            return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                           "grid %ux%ux%u, block %ux%ux%u: every dimension must be at least 1",
                           c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z);
        tf::CallFrame frame(rt);
        if ((st = frame.enter()) != TF_OK) return st;
        return TF_CU(state.api(), cuLaunchKernel, static_cast<CUfunction>(function), c.grid_x,
                     c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z, c.shared_memory_bytes,
                     frame.stream(), args, nullptr);
    });
}

}  // extern "C"
