// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/cublaslt_library.h"

#include "driver/vendor_library.h"

namespace tf {
namespace {

LoadedVendor<CublasLtApi> open_cublaslt() {
    static const char *const kSonames[] = {"libcublasLt.so.13", "libcublasLt.so.12", nullptr};
    LoadedVendor<CublasLtApi> r{};
    r.lib = open_vendor_library({"cuBLASLt", kCublasLtPathEnv, kSonames});
    if (r.lib.status != TF_OK) return r;
    void *h = r.lib.handle;
    r.api.handle = h;
    resolve_symbol(h, "cublasLtGetStatusName", &r.api.names.name);
    resolve_symbol(h, "cublasLtGetStatusString", &r.api.names.text);
    // The first missing one is named.
    if (!resolve_symbol(h, "cublasLtCreate", &r.api.create))
        refuse_missing_symbol(&r.lib, "cuBLASLt", "cublasLtCreate");
    else if (!resolve_symbol(h, "cublasLtDestroy", &r.api.destroy))
        refuse_missing_symbol(&r.lib, "cuBLASLt", "cublasLtDestroy");
    return r;
}

// Written once under cuBLASLt's LoadOnce; trivially destructible.
LoadedVendor<CublasLtApi> g_loaded;

}  // namespace

const CublasLtApi *load_cublaslt() {
    return require_vendor(load_vendor(Loaded::cublaslt, &g_loaded, open_cublaslt), "cuBLASLt");
}

}  // namespace tf
