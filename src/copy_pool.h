// Host threads that copy staged download chunks into pageable memory.
//
// One pool per runtime, started at the runtime's first bulk download into
// pageable memory and stopped when the runtime is torn down.  Callers split
// a copy into pieces; the pool's threads and the caller run them.
//
// INVARIANTS:
//  * The threads run memcpy only: they never call CUDA or this library, and
//    they block every signal (signals go to the application's threads).
//  * copy() returns only when every piece of that copy is done, and a thread
//    never touches a piece after counting it done, so the caller's buffers
//    (and the pieces on its stack) are free once copy() returns.
//  * Nothing allocates after start(): pieces live on the caller's stack.
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "tenferro_gpu.h"

namespace tf {

class CopyPool {
public:
    CopyPool() = default;
    // Stops and joins the threads.  Must not run in a forked child, where
    // the threads do not exist (TransferState leaks the pool there).
    ~CopyPool();
    CopyPool(const CopyPool &) = delete;
    CopyPool &operator=(const CopyPool &) = delete;

    // Starts up to `workers` threads (at most TF_MAX_DOWNLOAD_THREADS - 1)
    // and returns how many started; *error is the pthread_create result of
    // the first refusal, 0 if none.  Call once, before sharing the pool.
    unsigned start(unsigned workers, int *error);
    unsigned workers() const { return count_; }

    // Copies n bytes from src to dst in up to `ways` pieces run in parallel
    // (the caller runs one and helps with queued pieces); returns when all
    // are done.
    void copy(void *dst, const void *src, size_t n, unsigned ways);

private:
    struct Piece {
        Piece *next;
        char *dst;
        const char *src;
        size_t len;
        std::atomic<unsigned> *left;  // pieces of its copy not yet done
    };

    static void *worker_main(void *self);
    void post(Piece *first, Piece *last, unsigned n);
    Piece *pop_locked();
    Piece *try_pop();
    Piece *next_for_worker(bool spin);
    void run(Piece *p);
    void wait_done(const std::atomic<unsigned> &left);

    std::mutex mu_;
    std::condition_variable work_cv_;  // pieces queued, or stopping
    std::condition_variable done_cv_;  // some copy's last piece finished
    Piece *head_ = nullptr;            // FIFO of queued pieces, under mu_
    Piece *tail_ = nullptr;
    std::atomic<unsigned> queued_{0};  // length of the FIFO, for lock-free peeks
    bool stop_ = false;                // under mu_
    pthread_t threads_[TF_MAX_DOWNLOAD_THREADS];
    unsigned count_ = 0;
};

}  // namespace tf
