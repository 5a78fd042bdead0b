// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/call_frame.h"

#include "runtime/graph_capture.h"
#include "transfer/device_range.h"

namespace tf {

tf_status CallFrame::refuse_capture(const char *why) {
    return tf::refuse_capture(state_, slot_, stream_, why);
}

tf_status check_host_transfer(const CallFrame &frame, const char *device_name, uint64_t device,
                              const char *host_name, const void *host, size_t len,
                              HostMemory *host_kind) {
    tf_status st = check_device_range(frame.state(), device_name, device, len);
    if (st == TF_OK) st = classify_host_memory(frame.api(), host_name, host, host_kind);
    return st;
}

tf_status finish_host_copy(const CallFrame &frame, HostMemory host_kind, const void *host,
                           size_t len, tf_status st) {
    if (st != TF_OK && host_kind == HostMemory::page_locked)
        frame.state().host_pool().record_unfinished_copy(host, len, frame.slot(), frame.stream());
    return st;
}

}  // namespace tf
