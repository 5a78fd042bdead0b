// SPDX-License-Identifier: MIT OR Apache-2.0
// Public device memory calls: tf_alloc, tf_free.
#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/graph_capture.h"
#include "runtime/memory_pools.h"
#include "transfer/allocation_registry.h"
#include "transfer/device_range.h"

namespace {

constexpr char kNotCaptured[] =
    "device memory is not yet allocated or freed inside a capture: allocate before "
    "tf_graph_capture_begin and free after tf_graph_capture_end";

// Registers a new allocation for the address checks
// (transfer/allocation_registry.h); if the registry cannot grow, the
// allocation is given back and the std::bad_alloc goes on to the guard
// (TF_ERROR_OUT_OF_MEMORY, nothing allocated).
void register_or_free(const tf::CallFrame &frame, bool pools, CUdeviceptr p, size_t bytes) {
    try {
        tf::register_allocation(p, bytes, frame.state().info().ordinal,
                                frame.state().allocation_domain());
    } catch (...) {
        const tf::DriverApi &api = frame.api();
        CUresult r = pools ? api.cuMemFreeAsync(p, frame.stream()) : api.cuMemFree(p);
        (void)r;  // nothing more to do: the caller gets the allocation failure
        throw;
    }
}

}  // namespace

extern "C" {

TF_API tf_status tf_alloc(tf_runtime *rt, size_t bytes, uint64_t *out_ptr) {
    static const char op[] = "tf_alloc";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (!out_ptr) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_ptr is NULL");
        if (bytes == 0) {
            *out_ptr = 0;
            return TF_OK;
        }
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        if (st == TF_OK) st = tf::refuse_own_capture(state, frame.slot(), kNotCaptured);
        bool pools = false;
        if (st == TF_OK) st = tf::memory_pools_supported(state, &pools);
        if (st != TF_OK) return st;
        const tf::DriverApi &api = state.api();
        CUdeviceptr p = 0;
        st = pools ? TF_CU(api, cuMemAllocAsync, &p, bytes, frame.stream())
                   : TF_CU(api, cuMemAlloc, &p, bytes);
        if (st != TF_OK) return st;
        register_or_free(frame, pools, p, bytes);
        *out_ptr = p;
        return TF_OK;
    });
}

TF_API tf_status tf_free(tf_runtime *rt, uint64_t ptr) {
    static const char op[] = "tf_free";
    return tf::runtime_call(op, rt, [&](tf::RuntimeState &state) -> tf_status {
        if (ptr == 0) return TF_OK;
        tf::CallFrame frame(rt);
        tf_status st = frame.enter();
        if (st == TF_OK) st = tf::refuse_own_capture(state, frame.slot(), kNotCaptured);
        if (st == TF_OK) st = tf::check_device_range(state, "ptr", ptr, 0);
        bool pools = false;
        if (st == TF_OK) st = tf::memory_pools_supported(state, &pools);
        if (st != TF_OK) return st;
        // Whether ptr starts its allocation is the driver's to say: it alone
        // knows how a pool carves its memory.
        const tf::DriverApi &api = state.api();
        const char *call = pools ? "cuMemFreeAsync" : "cuMemFree";
        if (pools ? !api.cuMemFreeAsync : !api.cuMemFree) return tf::fail_missing(call);
        // Forgotten first: from now on no check trusts the range without
        // the driver, which refuses it once freed.
        tf::forget_allocation(ptr);
        CUresult r = pools ? api.cuMemFreeAsync(ptr, frame.stream()) : api.cuMemFree(ptr);
        if (r == CUDA_ERROR_INVALID_VALUE)
            return tf::fail(TF_ERROR_INVALID_ARGUMENT, call, TF_CODE_CUDA, r,
                            "ptr 0x%llx is not the start of an allocation (%s answered "
                            "CUDA_ERROR_INVALID_VALUE)",
                            static_cast<unsigned long long>(ptr), call);
        return tf::check_cuda(api, call, r);
    });
}

}  // extern "C"
