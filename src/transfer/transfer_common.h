// Steps every transfer call shares: the slot stream with the primary context
// current, and what kind of host memory a caller's pointer is.
#pragma once

#include <cuda.h>

#include "driver/context_scope.h"
#include "runtime/runtime_handle.h"
#include "runtime/runtime_state.h"
#include "transfer/device_range.h"

namespace tf {

// Makes the runtime's primary context current for `scope` and returns the
// calling thread's slot (through handle `rt`) and its stream, created at
// first use.
tf_status enter_slot_stream(const char *op, tf_runtime *rt, ContextScope &scope, int *slot,
                            CUstream *stream);

enum class HostMemory {
    pageable,     // unknown to CUDA: ordinary memory
    page_locked,  // allocated or registered with CUDA, or managed: the device can reach it
};

// What kind of host memory `p` is (one cuPointerGetAttribute).  Device
// memory (not managed) is TF_ERROR_INVALID_ARGUMENT naming `name`.  A context
// must be current.
tf_status classify_host_memory(const DriverApi &api, const char *op, const char *name,
                               const void *p, HostMemory *out);

// The common start of a copy between host and device memory: the slot
// stream with the primary context current (until the object goes), the
// device range checked, the kind of host memory found.
struct HostTransfer {
    ContextScope scope;
    int slot = 0;
    CUstream stream = nullptr;
    HostMemory host_kind = HostMemory::pageable;

    tf_status open(const char *op, tf_runtime *rt, const char *device_name, uint64_t device,
                   const char *host_name, const void *host, size_t len);
};

// Device copies whose ranges overlap are undefined: TF_ERROR_INVALID_ARGUMENT.
tf_status check_no_overlap(const char *op, uint64_t src, uint64_t dst, size_t len);

}  // namespace tf
