// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/transfer_state.h"

#include <cstring>
#include <memory>

#include "transfer/download_plan.h"
#include "util/error.h"
#include "util/fork_guard.h"
#include "util/log.h"

namespace tf {

TransferState::~TransferState() {
    CopyPool *pool = pool_.load(std::memory_order_acquire);
    // In a forked child the threads were not copied; joining them (or even
    // destroying the condition variables they waited on) could hang.
    if (pool && pool_fork_generation_ == fork_generation()) delete pool;
}

CopyPool &TransferState::pool(unsigned threads) {
    CopyPool *pool = pool_.load(std::memory_order_acquire);
    if (pool) return *pool;
    std::lock_guard<std::mutex> hold(start_mutex_);
    pool = pool_.load(std::memory_order_relaxed);
    if (pool) return *pool;
    std::unique_ptr<CopyPool> fresh(new CopyPool(kCopySpin));
    int error = 0;
    const unsigned wanted = threads > 0 ? threads - 1 : 0;
    const unsigned started = fresh->start(wanted, &error);
    if (started < wanted)
        log(TF_LOG_WARNING,
            "%s: the system refused to start a download copy thread (pthread_create: %s, %d); "
            "bulk transfers between pageable and device memory use %u thread%s instead of %u",
            current_operation(), std::strerror(error), error, started + 1, started ? "s" : "",
            threads);
    pool_fork_generation_ = fork_generation();
    pool_.store(fresh.get(), std::memory_order_release);
    return *fresh.release();
}

}  // namespace tf
