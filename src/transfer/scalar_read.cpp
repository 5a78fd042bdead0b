// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/scalar_read.h"

#include <cstring>
#include <thread>

#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "util/cpu_relax.h"
#include "util/log.h"

namespace tf {

// One thread: len bytes from src into the mailbox, a system-wide fence, then
// the sequence number into the flag at mailbox + 16.  PTX 7.0 for sm_52 and
// later, JIT-compiled by the driver for the device.
const char kScalarReadPtx[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry tf_read_scalar(\n"
    "\t.param .u64 tf_read_scalar_src,\n"
    "\t.param .u64 tf_read_scalar_mailbox,\n"
    "\t.param .u32 tf_read_scalar_len,\n"
    "\t.param .u32 tf_read_scalar_seq)\n"
    "{\n"
    "\t.reg .pred %p;\n"
    "\t.reg .u16 %v;\n"
    "\t.reg .u32 %n, %i, %s;\n"
    "\t.reg .u64 %src, %box, %at, %to, %off;\n"
    "\n"
    "\tld.param.u64 %src, [tf_read_scalar_src];\n"
    "\tld.param.u64 %box, [tf_read_scalar_mailbox];\n"
    "\tld.param.u32 %n, [tf_read_scalar_len];\n"
    "\tld.param.u32 %s, [tf_read_scalar_seq];\n"
    "\tcvta.to.global.u64 %src, %src;\n"
    "\tcvta.to.global.u64 %box, %box;\n"
    "\tmov.u32 %i, 0;\n"
    "copy:\n"
    "\tsetp.ge.u32 %p, %i, %n;\n"
    "\t@%p bra publish;\n"
    "\tcvt.u64.u32 %off, %i;\n"
    "\tadd.u64 %at, %src, %off;\n"
    "\tadd.u64 %to, %box, %off;\n"
    "\tld.global.u8 %v, [%at];\n"
    "\tst.global.u8 [%to], %v;\n"
    "\tadd.u32 %i, %i, 1;\n"
    "\tbra copy;\n"
    "publish:\n"
    "\tmembar.sys;\n"
    "\tst.volatile.global.u32 [%box+16], %s;\n"
    "\tret;\n"
    "}\n";

namespace {

constexpr char kKernelName[] = "tf_read_scalar";

inline uint32_t load_flag(const ScalarMailbox &box) {
    return __atomic_load_n(reinterpret_cast<const uint32_t *>(box.host + ScalarMailbox::kFlag),
                           __ATOMIC_ACQUIRE);
}

// Spins until the flag holds `seq` or `spin` has passed.
bool spin_for_flag(const ScalarMailbox &box, uint32_t seq, std::chrono::microseconds spin) {
    const auto deadline = std::chrono::steady_clock::now() + spin;
    for (unsigned i = 1;; ++i) {
        if (load_flag(box) == seq) return true;
        if (i % 32 == 0 && std::chrono::steady_clock::now() > deadline) return false;
        cpu_relax();
    }
}

// The path to take on `stream`: after a streak of quick reads the plan's
// idle one unasked (NOTE [idle streak]), else the idle or busy one as
// cuStreamQuery says; a path this runtime cannot run (an unmapped mailbox
// runs neither the kernel nor the flag write) falls back to copy_sync.
tf_status choose_path(const DriverApi &api, ScalarKernel &kernel, ScalarSupport &support,
                      CUstream stream, const ScalarReadPlan &plan, const ScalarMailbox &box,
                      ScalarPath *path, CUfunction *fn) {
    ScalarPath p = plan.busy;
    if (plan.idle != plan.busy) {
        if (plan.trust_idle_after && box.idle_streak >= plan.trust_idle_after) {
            p = plan.idle;
        } else {
            // A driver without the query: every read takes the busy path.
            const CUresult r = api.cuStreamQuery ? api.cuStreamQuery(stream) : CUDA_ERROR_NOT_READY;
            if (r == CUDA_SUCCESS)
                p = plan.idle;
            else if (r != CUDA_ERROR_NOT_READY)
                return fail_cuda(api, "cuStreamQuery", r);
        }
    }
    if (box.device == 0) p = ScalarPath::copy_sync;
    if (p == ScalarPath::kernel && !(*fn = kernel.function(api))) p = ScalarPath::copy_sync;
    if (p == ScalarPath::copy_flag && !support.can_write_flag(api)) p = ScalarPath::copy_sync;
    *path = p;
    return TF_OK;
}

// The flag write after the copy into the mailbox; a refusal (recorded in
// `support`, no error) leaves the copy queued for the wait to finish.
tf_status write_flag(const DriverApi &api, ScalarSupport &support, CUstream stream,
                     const ScalarMailbox &box, uint32_t seq, bool *refused) {
    const CUresult r = api.cuStreamWriteValue32(stream, box.device + ScalarMailbox::kFlag, seq,
                                                CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r == CUDA_SUCCESS) return TF_OK;
    if (!scalar_path_refused(r)) return fail_cuda(api, "cuStreamWriteValue32", r);
    support.flag_refused(api, r);
    *refused = true;
    return TF_OK;
}

// Queues the read on `path` (not copy_sync) and waits for its flag.
tf_status read_with_flag(const DriverApi &api, ScalarSupport &support, ScalarPath path,
                         CUfunction fn, CUstream stream, ScalarMailbox &box, uint64_t src,
                         size_t len, std::chrono::microseconds spin) {
    uint32_t seq = box.seq + 1;
    if (seq == 0) seq = 1;  // 0 is the fresh mailbox's flag
    box.seq = seq;
    tf_status st;
    bool refused = false;
    if (path == ScalarPath::kernel) {
        CUdeviceptr from = src, to = box.device;
        uint32_t n = static_cast<uint32_t>(len);
        void *params[] = {&from, &to, &n, &seq};
        st = TF_CU(api, cuLaunchKernel, fn, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
    } else {
        st = TF_CU(api, cuMemcpyDtoHAsync, box.host, src, len, stream);
        if (st == TF_OK) st = write_flag(api, support, stream, box, seq, &refused);
    }
    if (st != TF_OK || (!refused && spin_for_flag(box, seq, spin))) return st;
    // Still running after the spin: block.  This wait also reports a fault
    // that kept the flag from being written.
    return TF_CU(api, cuStreamSynchronize, stream);
}

}  // namespace

const char *scalar_path_name(ScalarPath path) {
    switch (path) {
        case ScalarPath::copy_sync: return "copy_sync";
        case ScalarPath::copy_flag: return "copy_flag";
        case ScalarPath::kernel: return "kernel";
    }
    return "?";
}

bool scalar_path_refused(CUresult r) {
    return r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_NOT_PERMITTED ||
           r == CUDA_ERROR_INVALID_VALUE;
}

tf_status ensure_scalar_mailbox(const DriverApi &api, ScalarSupport &support, ScalarMailbox &box) {
    if (box.host) return TF_OK;
    void *p = nullptr;
    // Mapped for the kernel and cuStreamWriteValue32; not write-combined:
    // the host reads it.
    const bool map = support.can_map();
    tf_status st =
        TF_CU(api, cuMemHostAlloc, &p, ScalarMailbox::kBytes, map ? CU_MEMHOSTALLOC_DEVICEMAP : 0u);
    if (st != TF_OK) return st;
    CUdeviceptr d = 0;
    const CUresult r = !map                            ? CUDA_SUCCESS
                       : api.cuMemHostGetDevicePointer ? api.cuMemHostGetDevicePointer(&d, p, 0)
                                                       : CUDA_ERROR_NOT_SUPPORTED;
    if (r != CUDA_SUCCESS && scalar_path_refused(r)) {
        support.mapping_refused(api, r);
        d = 0;  // kept unmapped: copy and wait
    } else if (r != CUDA_SUCCESS) {
        if (api.cuMemFreeHost) api.cuMemFreeHost(p);  // no copy used it yet
        return fail_cuda(api, "cuMemHostGetDevicePointer", r);
    }
    std::memset(p, 0, ScalarMailbox::kBytes);
    box.host = static_cast<unsigned char *>(p);
    box.device = d;
    box.seq = 0;
    return TF_OK;
}

void release_scalar_mailbox(const DriverApi &api, ScalarMailbox &box) {
    if (box.host && api.cuMemFreeHost) {
        const CUresult r = api.cuMemFreeHost(box.host);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
            char code[96];
            log(TF_LOG_WARNING, "%s: cuMemFreeHost of transfer staging failed: %s",
                current_operation(), describe_cuda(api, r, code, sizeof code));
        }
    }
    box = ScalarMailbox();
}

CUfunction ScalarKernel::function(const DriverApi &api) {
    const int s = state_.load(std::memory_order_acquire);
    if (s == kLoaded) return function_;
    if (s == kFailed) return nullptr;
    std::lock_guard<std::mutex> hold(load_mutex_);
    if (state_.load(std::memory_order_relaxed) == kLoaded) return function_;
    if (state_.load(std::memory_order_relaxed) == kFailed) return nullptr;
    const char *call = "cuModuleLoadDataEx";
    CUresult r = api.cuModuleLoadDataEx
                     ? api.cuModuleLoadDataEx(&module_, kScalarReadPtx, 0, nullptr, nullptr)
                     : CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS) {
        call = "cuModuleGetFunction";
        r = api.cuModuleGetFunction ? api.cuModuleGetFunction(&function_, module_, kKernelName)
                                    : CUDA_ERROR_NOT_FOUND;
    }
    if (r == CUDA_SUCCESS) {
        state_.store(kLoaded, std::memory_order_release);
        return function_;
    }
    char code[96];
    log(TF_LOG_WARNING,
        "%s: %s of the scalar read kernel failed: %s; this runtime reads scalars with a copy "
        "and a stream wait",
        current_operation(), call, describe_cuda(api, r, code, sizeof code));
    if (module_ && api.cuModuleUnload) api.cuModuleUnload(module_);
    module_ = nullptr;
    function_ = nullptr;
    state_.store(kFailed, std::memory_order_release);
    return nullptr;
}

bool ScalarSupport::can_write_flag(const DriverApi &api) {
    if (api.cuStreamWriteValue32 && !flag_refused_.load(std::memory_order_relaxed)) return true;
    if (!api.cuStreamWriteValue32 && !flag_logged_.exchange(true, std::memory_order_relaxed))
        log(TF_LOG_WARNING,
            "%s: the CUDA driver has no cuStreamWriteValue32 (CUDA 11.7); this runtime reads "
            "scalars on an idle stream with a copy and a stream wait",
            current_operation());
    return false;
}

void ScalarSupport::flag_refused(const DriverApi &api, CUresult r) {
    flag_refused_.store(true, std::memory_order_relaxed);
    if (flag_logged_.exchange(true, std::memory_order_relaxed)) return;
    char code[96];
    log(TF_LOG_WARNING,
        "%s: cuStreamWriteValue32 was refused: %s (stream memory operations off on this "
        "platform?); this runtime reads scalars on an idle stream with a copy and a stream wait",
        current_operation(), describe_cuda(api, r, code, sizeof code));
}

void ScalarSupport::mapping_refused(const DriverApi &api, CUresult r) {
    mapping_refused_.store(true, std::memory_order_relaxed);
    if (mapping_logged_.exchange(true, std::memory_order_relaxed)) return;
    char code[96];
    log(TF_LOG_WARNING,
        "%s: cuMemHostGetDevicePointer of a scalar mailbox was refused: %s; this runtime reads "
        "scalars with a copy and a stream wait",
        current_operation(), describe_cuda(api, r, code, sizeof code));
}

void ScalarKernel::release(const DriverApi &api) {
    if (state_.load(std::memory_order_acquire) != kLoaded) return;
    const CUresult r = api.cuModuleUnload ? api.cuModuleUnload(module_) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
        char code[96];
        log(TF_LOG_WARNING,
            "tf_runtime_release: cuModuleUnload of the scalar read kernel failed: %s",
            describe_cuda(api, r, code, sizeof code));
    }
    module_ = nullptr;
    function_ = nullptr;
    state_.store(kFailed, std::memory_order_release);
}

tf_status read_scalar(CallFrame &frame, uint64_t src, void *out, size_t len,
                      const ScalarReadPlan &plan) {
    const DriverApi &api = frame.api();
    const CUstream stream = frame.stream();
    tf_status st = frame.lock_slot();
    if (st != TF_OK) return st;
    ScalarMailbox &box = frame.resources().transfer.mailbox;
    TransferState &transfers = frame.state().transfers();
    if ((st = ensure_scalar_mailbox(api, transfers.scalar_support, box)) != TF_OK) return st;
    std::atomic<bool> &launched = frame.resources().transfer.graph_launched;
    if (launched.load(std::memory_order_relaxed)) {
        launched.store(false, std::memory_order_relaxed);
        box.idle_streak = 0;
    }
    ScalarPath path = ScalarPath::copy_sync;
    CUfunction fn = nullptr;
    st = choose_path(api, transfers.scalar_kernel, transfers.scalar_support, stream, plan, box,
                     &path, &fn);
    if (st != TF_OK) return st;  // nothing queued
    const auto start = std::chrono::steady_clock::now();
    if (path == ScalarPath::copy_sync) {
        st = TF_CU(api, cuMemcpyDtoHAsync, box.host, src, len, stream);
        if (st == TF_OK) st = TF_CU(api, cuStreamSynchronize, stream);
    } else {
        st = read_with_flag(api, transfers.scalar_support, path, fn, stream, box, src, len,
                            plan.spin);
    }
    // A read as quick as on an idle stream extends the streak; a slower one
    // had work ahead of it and ends it.
    if (std::chrono::steady_clock::now() - start <= kScalarIdleWindow)
        box.idle_streak += box.idle_streak < plan.trust_idle_after;
    else
        box.idle_streak = 0;
    if (st != TF_OK) {
        // Neither a failed submission nor a failed wait proves the device
        // is done with the mailbox.
        abandon_scalar_mailbox(box);
        return st;
    }
    std::memcpy(out, box.host, len);
    return TF_OK;
}

}  // namespace tf
