// SPDX-License-Identifier: MIT OR Apache-2.0
// Public copies between the devices of two runtimes: tf_peer_copy_available,
// tf_peer_copy.
#include "api/guard.h"
#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "transfer/device_range.h"
#include "util/log.h"

namespace {

// The second runtime of a peer call: a live handle of a usable runtime.
tf_status check_second(const tf_runtime *rt) {
    if (!rt) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "dst_rt is NULL");
    tf_status st = tf::check_handle(rt);
    return st == TF_OK ? rt->state->check_usable() : st;
}

// The frame of the calls on two runtimes: both usable, then
// body(src, dst, &faulted).  A sticky fault belongs to the runtime whose
// context was current when the driver reported it: the body points
// `faulted` at the destination for the calls it makes in the destination's
// context (the source is the default), and that runtime alone remembers
// the fault.
template <class Body>
tf_status peer_call(const char *op, tf_runtime *src_rt, tf_runtime *dst_rt, Body &&body) {
    return tf::guarded(op, [&]() -> tf_status {
        tf_status st = tf::check_handle(src_rt);
        if (st != TF_OK) return st;
        tf::RuntimeState &from = *src_rt->state;
        if ((st = from.check_usable()) != TF_OK || (st = check_second(dst_rt)) != TF_OK) return st;
        tf::RuntimeState *faulted = &from;
        st = body(from, *dst_rt->state, &faulted);
        if (st == TF_ERROR_DEVICE_FAULT) faulted->note_fault();
        return st;
    });
}

// Whether the source device reaches the destination's memory directly.
tf_status direct_access(const tf::RuntimeState &src, const tf::RuntimeState &dst, bool *out) {
    if (src.device() == dst.device()) {
        *out = true;
        return TF_OK;
    }
    int can = 0;
    tf_status st = TF_CU(src.api(), cuDeviceCanAccessPeer, &can, src.device(), dst.device());
    if (st == TF_OK) *out = can != 0;
    return st;
}

// Lets the source's primary context (current) reach the destination's
// memory, once per destination runtime (transfer/transfer_state.h says why not per
// device).  A refusal only costs speed: the driver then stages the copy
// through host memory.
void enable_peer_access(const tf::RuntimeState &src, const tf::RuntimeState &dst) {
    const int device = dst.info().ordinal;
    if (device >= 0 && device < tf::TransferState::kPeerDevices) {
        std::atomic<uint64_t> &done = src.transfers().peer_set_up_for[device];
        if (done.exchange(dst.identity(), std::memory_order_relaxed) == dst.identity()) return;
    }
    const tf::DriverApi &api = src.api();
    CUresult r = api.cuCtxEnablePeerAccess ? api.cuCtxEnablePeerAccess(dst.context(), 0)
                                           : CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return;
    char what[96];
    tf::log(TF_LOG_WARNING,
            "%s: cuCtxEnablePeerAccess from device %d to device %d failed: %s; peer copies "
            "between them are staged through host memory",
            tf::current_operation(), src.info().ordinal, device,
            tf::describe_cuda(api, r, what, sizeof what));
}

// The destination range, checked with the destination's context current:
// from the source's context the driver may not find another device's
// allocation.  Costs two context switches, none on one device.
tf_status check_destination(tf::RuntimeState &to, uint64_t dst, size_t len) {
    tf::CallFrame frame(to);
    tf_status st = frame.enter_context();
    // Asked of the driver even for a tf_alloc range: the question, in the
    // destination's context, is also what finds a sticky fault there and
    // blames the destination for it (transfer/device_range.h).
    return st == TF_OK ? tf::check_device_range_with_driver(to, "dst", dst, len) : st;
}

// The copy on the source's slot stream, in the source's context, after the
// checks of both ranges (the destination's in its own context).
tf_status copy_between(tf_runtime *src_rt, tf::RuntimeState &from, tf::RuntimeState &to,
                       uint64_t src, uint64_t dst, size_t len, tf::RuntimeState **faulted) {
    const bool same_device = from.device() == to.device();
    tf_status st = same_device ? tf::check_no_overlap(src, dst, len) : TF_OK;
    if (st != TF_OK) return st;
    tf::CallFrame frame(src_rt);
    bool direct = false;
    st = frame.enter();
    if (st == TF_OK) st = tf::check_device_range(from, "src", src, len);
    if (st == TF_OK && (st = check_destination(to, dst, len)) == TF_ERROR_DEVICE_FAULT)
        *faulted = &to;  // reported in the destination's context
    if (st == TF_OK) st = direct_access(from, to, &direct);
    if (st != TF_OK) return st;
    if (direct && !same_device) enable_peer_access(from, to);
    return TF_CU(from.api(), cuMemcpyPeerAsync, dst, to.context(), src, from.context(), len,
                 frame.stream());
}

}  // namespace

extern "C" {

TF_API tf_status tf_peer_copy_available(tf_runtime *src_rt, tf_runtime *dst_rt,
                                        int32_t *out_available) {
    static const char op[] = "tf_peer_copy_available";
    return peer_call(
        op, src_rt, dst_rt,
        [&](tf::RuntimeState &src, tf::RuntimeState &dst, tf::RuntimeState **) -> tf_status {
            if (!out_available) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_available is NULL");
            bool direct = false;
            tf_status st = direct_access(src, dst, &direct);
            if (st == TF_OK) *out_available = direct ? 1 : 0;
            return st;
        });
}

TF_API tf_status tf_peer_copy(tf_runtime *src_rt, uint64_t src, tf_runtime *dst_rt, uint64_t dst,
                              size_t len) {
    static const char op[] = "tf_peer_copy";
    return peer_call(
        op, src_rt, dst_rt,
        [&](tf::RuntimeState &from, tf::RuntimeState &to, tf::RuntimeState **faulted) -> tf_status {
            if (len == 0) return TF_OK;
            return copy_between(src_rt, from, to, src, dst, len, faulted);
        });
}

}  // extern "C"
