/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// tf_download_scalar below the copy engine's floor.
//
// A copy into page-locked memory followed by cuStreamSynchronize costs the
// copy engine's start-up and the driver's blocking wait.  Two faster ways
// finish the read with a host thread spinning on a flag in the slot's
// mailbox (page-locked, mapped into the device's address space):
//  * kernel: a one-thread kernel (PTX text below, loaded once per runtime)
//    copies the value into the mailbox and then writes the flag.  Behind
//    queued work it starts as soon as that work ends, where a copy + wait
//    adds several microseconds;
//  * copy_flag: cuMemcpyDtoHAsync into the mailbox, then
//    cuStreamWriteValue32 of the flag (default flags: a memory barrier
//    first).  On an idle stream it beats the kernel and the blocking wait.
// The read asks cuStreamQuery whether the slot's stream is idle and takes
// the plan's idle or busy path.  The spin is bounded: then a blocking
// cuStreamSynchronize, which also reports a sticky fault.
//
// Where the driver cannot run a path (no cuStreamWriteValue32, the kernel
// cannot be loaded) or refuses it (the flag write or the mailbox's mapping
// answers CUDA_ERROR_NOT_SUPPORTED, _NOT_PERMITTED or _INVALID_VALUE), the
// runtime copies and waits instead, for good, with one warning
// (ScalarSupport).  The read that meets a refusal still succeeds: a refused
// flag write leaves the copy queued, and the wait finishes it.
//
// INVARIANTS:
//  * The flag holds the slot's sequence number of the read that wrote it:
//    a read waits for its own number, never a stale one.
//  * A mailbox the device may still write after a failed call is
//    abandoned (leaked, never reused); the next read allocates a new one.
//  * No allocation after the slot's first read and the runtime's first
//    kernel read.
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "driver/driver_api.h"
#include "tenferro_gpu.h"

namespace tf {

class CallFrame;

enum class ScalarPath : uint8_t {
    copy_sync,  // cuMemcpyDtoHAsync + cuStreamSynchronize
    copy_flag,  // cuMemcpyDtoHAsync + cuStreamWriteValue32 + spin
    kernel,     // tf_read_scalar kernel + spin
};

// The library's choice; bench/tune_download sweeps the others.
constexpr ScalarPath kScalarIdlePath = ScalarPath::copy_flag;
constexpr ScalarPath kScalarBusyPath = ScalarPath::kernel;
// Spin on the flag for this long, then wait blocking: a read behind a long
// kernel does not burn a core.
constexpr std::chrono::microseconds kScalarSpin{100};

// NOTE [idle streak]: cuStreamQuery costs about 1.3 us on an H200, a fifth
// of an idle read, and right after a read it may still see that read's last
// op retiring.  So a slot counts its reads in a row that finished within
// kScalarIdleWindow (as quick as on an idle stream, whichever path they
// took); after kScalarTrustIdleAfter of them a read takes the idle path
// without asking.  A slower read (work was queued ahead of it) ends the
// streak, and the next read asks again; so does a graph launch on the slot
// (TransferSlot::graph_launched), whose work no earlier read could see.  Only the speed depends on
// the guess: every path reads after all work queued on the stream.
constexpr unsigned kScalarTrustIdleAfter = 8;
constexpr std::chrono::microseconds kScalarIdleWindow{12};

struct ScalarReadPlan {
    ScalarPath idle = kScalarIdlePath;  // the stream has nothing queued
    ScalarPath busy = kScalarBusyPath;  // it has work queued
    std::chrono::microseconds spin = kScalarSpin;
    unsigned trust_idle_after = kScalarTrustIdleAfter;  // 0: always ask
};

const char *scalar_path_name(ScalarPath path);

// The slot's mailbox: kMailboxBytes of mapped page-locked memory, the value
// at offset 0, the 32-bit flag at kMailboxFlag.  Guarded by the slot lock.
struct ScalarMailbox {
    static constexpr size_t kBytes = 64;
    static constexpr size_t kFlag = 16;
    unsigned char *host = nullptr;  // NULL until the slot's first read
    CUdeviceptr device = 0;         // the same memory as the device addresses it
    uint32_t seq = 0;               // number of the slot's latest read
    unsigned idle_streak = 0;       // reads in a row that found the stream idle
};

class ScalarSupport;

// Allocate the mailbox if missing (the primary context current, the slot
// lock held), mapped for the device unless `support` learnt it cannot be; a
// refused mapping leaves it unmapped (device 0: copy and wait only).  A
// failure frees what the call made.
tf_status ensure_scalar_mailbox(const DriverApi &api, ScalarSupport &support, ScalarMailbox &box);
inline void abandon_scalar_mailbox(ScalarMailbox &box) { box = ScalarMailbox(); }
void release_scalar_mailbox(const DriverApi &api, ScalarMailbox &box);

// The runtime's read kernel and what it found missing.  One per runtime
// (TransferState).
class ScalarKernel {
public:
    // The kernel, its module loaded by the first call; NULL if the module
    // cannot be loaded (logged once, never tried again).
    CUfunction function(const DriverApi &api);
    // Teardown, with the primary context current and every stream retired.
    void release(const DriverApi &api);

private:
    static constexpr int kUnloaded = 0, kLoaded = 1, kFailed = 2;
    std::mutex load_mutex_;
    std::atomic<int> state_{kUnloaded};
    CUmodule module_ = nullptr;
    CUfunction function_ = nullptr;
};

// Whether a driver answer to the flag write or the mailbox's mapping is a
// refusal of the feature (the runtime falls back for good) rather than a
// failure of this read.
bool scalar_path_refused(CUresult r);

// What the driver lets this runtime's scalar reads use, learnt by the first
// reads and never tried again once refused (one per runtime,
// TransferState).  Each refusal is logged once.  Nothing is asked up front:
// CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS gated the v1 stream memory
// operations that CUDA 12.0, the oldest driver the library loads, removed;
// the v2 cuStreamWriteValue32 the library calls is on by default.
class ScalarSupport {
public:
    // Whether cuStreamWriteValue32 may be tried: the driver has it and never
    // refused it.  Logs once when the driver lacks it.
    bool can_write_flag(const DriverApi &api);
    // Whether a new mailbox is to be mapped for the device.
    bool can_map() const { return !mapping_refused_.load(std::memory_order_relaxed); }
    // The driver answered `r` (scalar_path_refused) to a flag write or a
    // mailbox's mapping: from now on the runtime copies and waits.
    void flag_refused(const DriverApi &api, CUresult r);
    void mapping_refused(const DriverApi &api, CUresult r);

private:
    std::atomic<bool> flag_refused_{false};
    std::atomic<bool> mapping_refused_{false};
    std::atomic<bool> flag_logged_{false};
    std::atomic<bool> mapping_logged_{false};
};

// Reads len (1 .. TF_SCALAR_DOWNLOAD_MAX_BYTES) bytes at src into out after
// the work queued on the stream of `frame` (entered: the primary context
// current), taking the slot lock through the frame.  On failure out is untouched and the
// mailbox abandoned if the device may still write it.
tf_status read_scalar(CallFrame &frame, uint64_t src, void *out, size_t len,
                      const ScalarReadPlan &plan);

// The kernel's PTX text (exposed for the benchmark's report).
extern const char kScalarReadPtx[];

}  // namespace tf
