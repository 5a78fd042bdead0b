// Steps every call on a slot shares: the slot stream with the primary
// context current, and for transfers the checks of both sides.
#pragma once

#include <cuda.h>

#include "driver/context_scope.h"
#include "runtime/runtime_handle.h"
#include "runtime/runtime_state.h"
#include "transfer/host_memory_kind.h"

namespace tf {

// Makes the runtime's primary context current for `scope` and returns the
// calling thread's slot (through handle `rt`) and its stream, created at
// first use.
tf_status enter_slot_stream(const char *op, tf_runtime *rt, ContextScope &scope, int *slot,
                            CUstream *stream);

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

}  // namespace tf
