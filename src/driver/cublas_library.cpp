// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/cublas_library.h"

#include "driver/driver_api.h"
#include "driver/vendor_library.h"
#include "util/error.h"

namespace tf {
namespace {

LoadedVendor<CublasApi> open_cublas() {
    static const char *const kSonames[] = {"libcublas.so.13", "libcublas.so.12", nullptr};
    LoadedVendor<CublasApi> r{};
    r.lib = open_vendor_library({"cuBLAS", kCublasPathEnv, kSonames});
    if (r.lib.status != TF_OK) return r;
    void *h = r.lib.handle;
    r.api.handle = h;
    resolve_symbol(h, "cublasGetStatusName", &r.api.names.name);
    resolve_symbol(h, "cublasGetStatusString", &r.api.names.text);
#define TF_CUBLAS_REQUIRE(member, name) \
    if (!resolve_symbol(h, name, &r.api.member)) refuse_missing_symbol(&r.lib, "cuBLAS", name)
    TF_CUBLAS_REQUIRE(create, "cublasCreate_v2");
    TF_CUBLAS_REQUIRE(destroy, "cublasDestroy_v2");
    TF_CUBLAS_REQUIRE(set_stream, "cublasSetStream_v2");
    TF_CUBLAS_REQUIRE(set_workspace, "cublasSetWorkspace_v2");
    TF_CUBLAS_REQUIRE(set_pointer_mode, "cublasSetPointerMode_v2");
    TF_CUBLAS_REQUIRE(get_property, "cublasGetProperty");
#undef TF_CUBLAS_REQUIRE
    return r;
}

// Written once under cuBLAS's LoadOnce; trivially destructible.
LoadedVendor<CublasApi> g_loaded;

const LoadedVendor<CublasApi> *loaded() {
    return load_vendor(Loaded::cublas, &g_loaded, open_cublas);
}

}  // namespace

const CublasApi *load_cublas() { return require_vendor(loaded(), "cuBLAS"); }

bool cublas_loadable() { return vendor_loadable(loaded()); }

const char *cublas_status_name(const BlasStatusText &names, int32_t status) {
    const char *name = names.name ? names.name(static_cast<cublasStatus_t>(status)) : nullptr;
    return name ? name : "cuBLAS status";
}

namespace {

const char *status_text(const BlasStatusText &names, int32_t status) {
    const char *text = names.text ? names.text(static_cast<cublasStatus_t>(status)) : nullptr;
    return text ? text : "no description";
}

}  // namespace

tf_status fail_cublas(const BlasStatusText &names, const char *call, int32_t status) {
    return fail(TF_ERROR_PROVIDER, call, TF_CODE_CUBLAS, status, "cuBLAS %s failed: %s (%d): %s",
                call, cublas_status_name(names, status), static_cast<int>(status),
                status_text(names, status));
}

tf_status fail_cublas_create(const CublasApi &api, int32_t status) {
    static const char call[] = "cublasCreate_v2";
    char buf[512];
    const char *file = loaded_file(api.handle, buf, sizeof buf);
    if (!file) file = "an unknown file";
    const char *driver = driver_override_path();
    // A real cuBLAS opens libcuda.so.1 itself; when that is not the driver
    // the override named (or there is none), CUDA does not initialize.
    if (status == CUBLAS_STATUS_NOT_INITIALIZED && driver)
        return fail(TF_ERROR_PROVIDER, call, TF_CODE_CUBLAS, status,
                    "cuBLAS %s failed: %s (%d): %s; the cuBLAS loaded from %s uses the "
                    "libcuda.so.1 the loader finds, not the %s=%s this library uses: put that "
                    "driver's folder first on LD_LIBRARY_PATH instead",
                    call, cublas_status_name(api, status), static_cast<int>(status),
                    status_text(api.names, status), file, kDriverPathEnv, driver);
    return fail(TF_ERROR_PROVIDER, call, TF_CODE_CUBLAS, status,
                "cuBLAS %s failed: %s (%d): %s (cuBLAS loaded from %s)", call,
                cublas_status_name(api, status), static_cast<int>(status),
                status_text(api.names, status), file);
}

}  // namespace tf
