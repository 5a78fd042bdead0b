/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What a runtime keeps for its transfers, beside the per-slot staging
// (transfer/transfer_slot.h): the copy threads and answers cached from the driver.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "transfer/copy_pool.h"
#include "transfer/scalar_read.h"

namespace tf {

class TransferState {
public:
    TransferState() = default;
    // Stops the copy threads; in a forked child, where they do not exist,
    // the pool is leaked instead.
    ~TransferState();
    TransferState(const TransferState &) = delete;
    TransferState &operator=(const TransferState &) = delete;

    // The runtime's copy pool with up to `threads` - 1 threads, started by
    // the first call.  A thread the system refuses is logged once, and the
    // pool keeps those that started.  Throws std::bad_alloc.
    CopyPool &pool(unsigned threads);

    // tf_download_scalar's kernel, loaded at the first read that needs it,
    // and what the driver let its reads use.
    ScalarKernel scalar_kernel;
    ScalarSupport scalar_support;

    // Devices the process sees (cuDeviceGetCount), -1 until asked.  With
    // one, no address can belong to another device.
    std::atomic<int> device_count{-1};
    // Peer access from this runtime's context (tf_peer_copy): entry d holds
    // the identity of the runtime on device d it was last set up (or
    // refused) for.  Keyed by runtime, not device or CUcontext: once every
    // runtime of device d is released its primary context is destroyed,
    // and with it the peer mapping, while the handle a new retain returns
    // may be the same.  A destination runtime that holds its context is
    // proof that the mapping made for it still stands.  Devices from
    // kPeerDevices on are set up on every copy (the driver then answers
    // "already enabled").
    static constexpr int kPeerDevices = 64;
    std::atomic<uint64_t> peer_set_up_for[kPeerDevices]{};

private:
    std::mutex start_mutex_;  // serializes starting the pool
    std::atomic<CopyPool *> pool_{nullptr};
    uint32_t pool_fork_generation_ = 0;
};

}  // namespace tf
