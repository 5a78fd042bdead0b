// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/slot_cublaslt.h"

#include "util/error.h"
#include "util/log.h"

namespace tf {
namespace {

void destroy_logged(const CublasLtApi &lt, cublasLtHandle_t h, const char *what) {
    cublasStatus_t s = lt.destroy(h);
    if (s != CUBLAS_STATUS_SUCCESS)
        log(TF_LOG_WARNING, "%s: cublasLtDestroy%s failed: %s (%d)", current_operation(), what,
            cublas_status_name(lt.names, s), static_cast<int>(s));
}

}  // namespace

tf_status create_slot_cublaslt(const DriverApi &driver, const CublasLtApi &lt,
                               uint64_t workspace_bytes, SlotCublas *out) {
    tf_status st = check_workspace_entries(driver, workspace_bytes);
    if (st != TF_OK) return st;
    cublasLtHandle_t h = nullptr;
    cublasStatus_t s = lt.create(&h);
    if (s != CUBLAS_STATUS_SUCCESS) return fail_cublas(lt.names, "cublasLtCreate", s);
    bool made = false;
    st = ensure_slot_workspace(driver, workspace_bytes, out, &made);
    if (st != TF_OK) {
        destroy_logged(lt, h, " of a half-made handle");
        return st;
    }
    out->lt_handle = h;
    return TF_OK;
}

void release_slot_cublaslt(SlotCublas *slot) {
    // Under teardown's operation name (tf_runtime_release).
    if (!slot->lt_handle) return;
    // The table is loaded: a handle exists only if loading succeeded.
    destroy_logged(*load_cublaslt(), slot->lt_handle, "");
    slot->lt_handle = nullptr;
}

}  // namespace tf
