// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/copy_pool.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "transfer/fresh_pages.h"
#include "util/cpu_relax.h"

namespace tf {
namespace {

// Pieces start at multiples of this in the destination, so no two threads
// share a page.
constexpr size_t kPieceAlign = 4096;

// Polls `ready` until it holds or `spin` has passed; returns its last answer.
template <class Ready>
bool spin_until(std::chrono::microseconds spin, Ready &&ready) {
    const auto deadline = std::chrono::steady_clock::now() + spin;
    for (unsigned i = 1;; ++i) {
        if (ready()) return true;
        if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) return false;
        cpu_relax();
    }
}

}  // namespace

// ---- CopyJob ----------------------------------------------------------------

CopyJob::CopyJob(void *dst, const void *src, size_t n, unsigned pieces, bool populate)
    : dst_(static_cast<char *>(dst)),
      src_(static_cast<const char *>(src)),
      n_(n),
      count_(pieces ? pieces : 1),
      populate_(populate) {
    piece_ = ((n + count_ - 1) / count_ + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
    // Rounding pieces up to pages can leave the last ones empty: drop them.
    while (count_ > 1 && cut(count_ - 1) >= n_) --count_;
    left_.store(count_, std::memory_order_relaxed);
}

size_t CopyJob::cut(unsigned i) const {
    if (i == 0) return 0;
    if (i >= count_) return n_;
    const uintptr_t base = reinterpret_cast<uintptr_t>(dst_);
    const uintptr_t at = (base + i * piece_ + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
    return std::min(n_, static_cast<size_t>(at - base));
}

void CopyJob::run(unsigned i) {
    const size_t a = cut(i), b = cut(i + 1);
    if (b <= a) return;
    if (populate_) populate_for_write(dst_ + a, b - a);
    std::memcpy(dst_ + a, src_ + a, b - a);
}

void CopyJob::run_all() {
    for (unsigned i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < count_;) {
        run(i);
        left_.fetch_sub(1, std::memory_order_relaxed);
    }
}

// ---- CopyPool: threads --------------------------------------------------------

CopyPool::CopyPool(std::chrono::microseconds spin) : spin_(spin) {}

unsigned CopyPool::start(unsigned workers, int *error) {
    *error = 0;
    if (workers > TF_MAX_DOWNLOAD_THREADS - 1) workers = TF_MAX_DOWNLOAD_THREADS - 1;
    // New threads inherit the creator's signal mask: block everything so
    // that no application signal handler ever runs on a pool thread.
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    while (count_ < workers) {
        int rc = pthread_create(&threads_[count_], nullptr, worker_main, this);
        if (rc != 0) {
            *error = rc;
            break;
        }
        pthread_setname_np(threads_[count_], "tf-download");
        ++count_;
    }
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    return count_;
}

CopyPool::~CopyPool() {
    {
        std::lock_guard<std::mutex> hold(mu_);
        stop_.store(true, std::memory_order_relaxed);
    }
    work_cv_.notify_all();
    for (unsigned i = 0; i < count_; ++i) pthread_join(threads_[i], nullptr);
}

void *CopyPool::worker_main(void *self) {
    CopyPool *pool = static_cast<CopyPool *>(self);
    // Threads start their scans at different entries, so that concurrent
    // downloads are served side by side.
    const unsigned first = pool->next_worker_.fetch_add(1, std::memory_order_relaxed);
    while (pool->await_work()) pool->scan(first);
    return nullptr;
}

// Returns when a job may have pieces to claim (true) or the pool stops.
bool CopyPool::await_work() {
    auto ready = [this] {
        return open_.load(std::memory_order_seq_cst) != 0 || stop_.load(std::memory_order_relaxed);
    };
    for (;;) {
        if (spin_until(spin_, ready)) return !stop_.load(std::memory_order_relaxed);
        std::unique_lock<std::mutex> hold(mu_);
        const uint64_t seen = wake_seq_;
        // Announced before open_ is read again (in the predicate): a poster
        // that raised open_ without seeing us sleep is seen by us.
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        work_cv_.wait(hold, [&] { return ready() || wake_seq_ != seen; });
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        if (ready()) return !stop_.load(std::memory_order_relaxed);
        // Woken ahead of work by wake(): poll again.
    }
}

void CopyPool::scan(unsigned first) {
    for (unsigned k = 0; k < kBoardEntries; ++k) {
        Entry &e = board_[(first + k) % kBoardEntries];
        if (!e.job.load(std::memory_order_relaxed)) continue;
        // Announce, then look: the owner clears the entry, then waits for
        // users to drop to zero, so a job seen here outlives the visit.
        e.users.fetch_add(1, std::memory_order_seq_cst);
        if (CopyJob *job = e.job.load(std::memory_order_seq_cst)) help(*job);
        e.users.fetch_sub(1, std::memory_order_release);
    }
}

// ---- CopyPool: jobs -----------------------------------------------------------

void CopyPool::wake() {
    if (sleepers_.load(std::memory_order_relaxed) == 0) return;
    {
        std::lock_guard<std::mutex> hold(mu_);
        ++wake_seq_;
    }
    work_cv_.notify_all();
}

void CopyPool::post(CopyJob &job) {
    if (count_ == 0 || job.count_ < 2) return;
    for (unsigned k = 0; k < kBoardEntries; ++k) {
        Entry &e = board_[k];
        bool free = false;
        if (e.taken.load(std::memory_order_relaxed) ||
            !e.taken.compare_exchange_strong(free, true, std::memory_order_acquire))
            continue;
        job.entry_ = static_cast<int>(k);
        job.posted_ = true;
        // Counted before it is visible, so open_ never goes below zero.
        open_.fetch_add(1, std::memory_order_seq_cst);
        e.job.store(&job, std::memory_order_seq_cst);
        if (sleepers_.load(std::memory_order_seq_cst) != 0) {
            { std::lock_guard<std::mutex> hold(mu_); }
            work_cv_.notify_all();
        }
        return;
    }
    // The board is full: the caller copies this one alone.
}

// Claims and runs pieces until none is left to claim.
void CopyPool::help(CopyJob &job) {
    for (;;) {
        const unsigned i = job.next_.fetch_add(1, std::memory_order_relaxed);
        if (i >= job.count_) {
            // Exactly one claim lands on count_: it closes the job.
            if (i == job.count_ && job.posted_) open_.fetch_sub(1, std::memory_order_seq_cst);
            return;
        }
        job.run(i);
        piece_done(job);
    }
}

void CopyPool::piece_done(CopyJob &job) {
    // seq_cst pairs with wait_done: either its predicate sees left_ at zero
    // or this sees owner_sleeps_ and wakes it.  The job is still alive: the
    // caller holds users on its entry, or is its owner.
    if (job.left_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        job.owner_sleeps_.load(std::memory_order_seq_cst)) {
        std::lock_guard<std::mutex> hold(mu_);
        done_cv_.notify_all();
    }
}

void CopyPool::wait_done(CopyJob &job) {
    auto done = [&job] { return job.left_.load(std::memory_order_seq_cst) == 0; };
    if (spin_until(spin_, done)) return;
    std::unique_lock<std::mutex> hold(mu_);
    job.owner_sleeps_.store(true, std::memory_order_seq_cst);
    done_cv_.wait(hold, done);
}

void CopyPool::withdraw(CopyJob &job) {
    Entry &e = board_[job.entry_];
    e.job.store(nullptr, std::memory_order_seq_cst);
    // Threads still on the entry only find nothing left to claim: they
    // leave within a few instructions unless the system preempts them.
    for (unsigned k = 0; e.users.load(std::memory_order_seq_cst) != 0; ++k) {
        if (k < 256)
            cpu_relax();
        else
            std::this_thread::yield();
    }
    e.taken.store(false, std::memory_order_release);
    job.entry_ = -1;
}

void CopyPool::finish(CopyJob &job) {
    help(job);
    if (job.left_.load(std::memory_order_acquire) != 0) wait_done(job);
    if (job.entry_ >= 0) withdraw(job);
}

}  // namespace tf
