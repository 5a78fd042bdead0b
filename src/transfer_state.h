// What a runtime keeps for its transfers, beside the per-slot staging
// (transfer_slot.h): the copy threads and answers cached from the driver.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "copy_pool.h"

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
    CopyPool &pool(unsigned threads, const char *op);

    // Whether the device has memory pools and the driver cuMemAllocAsync:
    // -1 not asked yet, else 0 or 1.
    std::atomic<int> memory_pools{-1};
    // Devices the process sees (cuDeviceGetCount), -1 until asked.  With
    // one, no address can belong to another device.
    std::atomic<int> device_count{-1};
    // Bit d: peer access to device d was set up (or refused) once.
    std::atomic<uint64_t> peers_tried{0};

private:
    std::mutex start_mutex_;  // serializes starting the pool
    std::atomic<CopyPool *> pool_{nullptr};
    uint32_t pool_fork_generation_ = 0;
};

}  // namespace tf
