// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/nvrtc_library.h"

#include "driver/vendor_library.h"
#include "util/error.h"

namespace tf {
namespace {

LoadedVendor<NvrtcApi> open_nvrtc() {
    static const char *const kSonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", nullptr};
    LoadedVendor<NvrtcApi> r{};
    r.lib = open_vendor_library({"NVRTC", kNvrtcPathEnv, kSonames});
    if (r.lib.status != TF_OK) return r;
    void *h = r.lib.handle;
#define TF_NVRTC_REQUIRE(member, name) \
    if (!resolve_symbol(h, name, &r.api.member)) refuse_missing_symbol(&r.lib, "NVRTC", name)
    TF_NVRTC_REQUIRE(error_string, "nvrtcGetErrorString");
    TF_NVRTC_REQUIRE(create, "nvrtcCreateProgram");
    TF_NVRTC_REQUIRE(destroy, "nvrtcDestroyProgram");
    TF_NVRTC_REQUIRE(compile, "nvrtcCompileProgram");
    TF_NVRTC_REQUIRE(log_size, "nvrtcGetProgramLogSize");
    TF_NVRTC_REQUIRE(log, "nvrtcGetProgramLog");
    TF_NVRTC_REQUIRE(ptx_size, "nvrtcGetPTXSize");
    TF_NVRTC_REQUIRE(ptx, "nvrtcGetPTX");
    TF_NVRTC_REQUIRE(cubin_size, "nvrtcGetCUBINSize");
    TF_NVRTC_REQUIRE(cubin, "nvrtcGetCUBIN");
#undef TF_NVRTC_REQUIRE
    return r;
}

// Written once under NVRTC's LoadOnce; trivially destructible.
LoadedVendor<NvrtcApi> g_loaded;

const LoadedVendor<NvrtcApi> *loaded() { return load_vendor(Loaded::nvrtc, &g_loaded, open_nvrtc); }

}  // namespace

const NvrtcApi *load_nvrtc() { return require_vendor(loaded(), "NVRTC"); }

bool nvrtc_loadable() { return vendor_loadable(loaded()); }

const char *nvrtc_result_name(const NvrtcApi &api, nvrtcResult r) {
    const char *name = api.error_string(r);
    return name ? name : "NVRTC result";
}

tf_status fail_nvrtc(const NvrtcApi &api, tf_status status, const char *call, nvrtcResult r) {
    return fail(status, call, TF_CODE_NVRTC, static_cast<int32_t>(r), "NVRTC %s failed: %s (%d)",
                call, nvrtc_result_name(api, r), static_cast<int>(r));
}

}  // namespace tf
