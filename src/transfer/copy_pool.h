/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Host threads that copy staged download steps into pageable memory.
//
// One pool per runtime, started at the runtime's first bulk download into
// pageable memory and stopped when the runtime is torn down.  A caller
// describes a copy as a CopyJob, posts it, and finishes it: the pool's
// threads and the caller claim its pieces one at a time, so threads that
// are quick (or arrive first) take more of them.
//
// INVARIANTS:
//  * The threads run memcpy and madvise only: they never call CUDA or this
//    library, and they block every signal (signals go to the application's
//    threads).
//  * finish() returns only when every piece of the job is done and no
//    thread holds the job any more, so the job and its buffers are free
//    once it returns.
//  * Handing out work takes no lock: a posted job sits on a board of
//    kBoardEntries entries; a thread announces itself on an entry (users)
//    before it reads the job there, and the owner clears the entry and waits
//    for its users to leave before finish() returns.  Locks are taken only
//    to sleep and to wake sleepers.
//  * Nothing allocates after start(): jobs live on the callers' stacks.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "tenferro_gpu.h"

namespace tf {

// n bytes from src to dst in `pieces` pieces cut at page boundaries of dst
// (no page of dst is written, or faulted in, by two threads).
class CopyJob {
public:
    // pieces >= 1.  populate: fault the destination's pages in with
    // populate_for_write (transfer/fresh_pages.h) before copying each piece.
    CopyJob(void *dst, const void *src, size_t n, unsigned pieces, bool populate);
    CopyJob(const CopyJob &) = delete;
    CopyJob &operator=(const CopyJob &) = delete;

    unsigned pieces() const { return count_; }
    // Copies every piece on the calling thread (no pool).
    void run_all();

private:
    friend class CopyPool;
    size_t cut(unsigned i) const;  // offset where piece i starts
    void run(unsigned i);

    char *dst_;
    const char *src_;
    size_t n_;
    size_t piece_;  // nominal piece length, a multiple of the page alignment
    unsigned count_;
    bool populate_;
    bool posted_ = false;            // counted in CopyPool::open_
    int entry_ = -1;                 // board entry while posted
    std::atomic<unsigned> next_{0};  // next piece to claim (may pass count_)
    std::atomic<unsigned> left_;     // pieces not yet done
    std::atomic<bool> owner_sleeps_{false};
};

class CopyPool {
public:
    // Posted jobs the board holds at once; further concurrent copies run on
    // their callers' threads alone.
    static constexpr unsigned kBoardEntries = 16;

    // spin: how long an idle thread, or a caller waiting for its pieces,
    // polls before it sleeps.
    explicit CopyPool(std::chrono::microseconds spin);
    // Stops and joins the threads.  Must not run in a forked child, where
    // the threads do not exist (TransferState leaks the pool there), nor
    // while a job is posted.
    ~CopyPool();
    CopyPool(const CopyPool &) = delete;
    CopyPool &operator=(const CopyPool &) = delete;

    // Starts up to `workers` threads (at most TF_MAX_DOWNLOAD_THREADS - 1)
    // and returns how many started; *error is the pthread_create result of
    // the first refusal, 0 if none.  Call once, before sharing the pool.
    unsigned start(unsigned workers, int *error);
    unsigned workers() const { return count_; }

    // Gets sleeping threads polling again, so that a post() soon after (a
    // device copy's time) finds them awake.  No system call when none sleeps.
    void wake();
    // Offers the job's pieces to the threads and returns at once.  The
    // caller must finish() the job before it goes out of scope, also when
    // its thread is cancelled: callers hold cancellation off
    // (DeferCancellation) from post() to finish().
    void post(CopyJob &job);
    // Runs the job's unclaimed pieces on the calling thread, waits for those
    // the threads took, and takes the job off the board.  Works for a job
    // that was never posted too.
    void finish(CopyJob &job);

private:
    struct alignas(64) Entry {
        std::atomic<CopyJob *> job{nullptr};
        std::atomic<unsigned> users{0};  // threads that may be reading `job`
        std::atomic<bool> taken{false};  // owned by a caller, job or not
    };

    static void *worker_main(void *self);
    bool await_work();
    void scan(unsigned first);
    void help(CopyJob &job);
    void piece_done(CopyJob &job);
    void wait_done(CopyJob &job);
    void withdraw(CopyJob &job);

    const std::chrono::microseconds spin_;
    Entry board_[kBoardEntries];
    std::atomic<int> open_{0};           // posted jobs with pieces left to claim
    std::atomic<unsigned> sleepers_{0};  // threads asleep on work_cv_, or about to be
    std::atomic<bool> stop_{false};
    std::atomic<unsigned> next_worker_{0};
    std::mutex mu_;
    std::condition_variable work_cv_;  // open_ rose, wake(), or stopping
    std::condition_variable done_cv_;  // the last piece of a job whose owner sleeps
    uint64_t wake_seq_ = 0;            // under mu_: counts wake() calls
    pthread_t threads_[TF_MAX_DOWNLOAD_THREADS];
    unsigned count_ = 0;
};

}  // namespace tf
