#include "copy_pool.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace tf {
namespace {

// Pieces start at multiples of this, so no two threads share a page.
constexpr size_t kPieceAlign = 4096;
// A thread that just finished a piece, or a caller waiting for its pieces,
// polls this long before it sleeps: chunks of one download follow each other
// within microseconds, and a futex wake costs about as much as the copy of
// a small piece.
constexpr auto kSpin = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#else
    std::this_thread::yield();
#endif
}

// Polls `ready` until it holds or kSpin has passed; returns its last answer.
template <class Ready>
bool spin_until(Ready &&ready) {
    const auto deadline = std::chrono::steady_clock::now() + kSpin;
    for (unsigned i = 1;; ++i) {
        if (ready()) return true;
        if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) return false;
        cpu_relax();
    }
}

}  // namespace

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
        stop_ = true;
    }
    work_cv_.notify_all();
    for (unsigned i = 0; i < count_; ++i) pthread_join(threads_[i], nullptr);
}

void *CopyPool::worker_main(void *self) {
    CopyPool *pool = static_cast<CopyPool *>(self);
    for (Piece *p = pool->next_for_worker(false); p; p = pool->next_for_worker(true))
        pool->run(p);
    return nullptr;
}

void CopyPool::post(Piece *first, Piece *last, unsigned n) {
    {
        std::lock_guard<std::mutex> hold(mu_);
        last->next = nullptr;
        if (tail_)
            tail_->next = first;
        else
            head_ = first;
        tail_ = last;
        queued_.fetch_add(n, std::memory_order_release);
    }
    work_cv_.notify_all();  // no system call when every thread is spinning
}

CopyPool::Piece *CopyPool::pop_locked() {
    Piece *p = head_;
    if (!p) return nullptr;
    head_ = p->next;
    if (!head_) tail_ = nullptr;
    queued_.fetch_sub(1, std::memory_order_relaxed);
    return p;
}

CopyPool::Piece *CopyPool::try_pop() {
    if (queued_.load(std::memory_order_acquire) == 0) return nullptr;
    std::lock_guard<std::mutex> hold(mu_);
    return pop_locked();
}

// The next piece for a pool thread; NULL when the pool stops.
CopyPool::Piece *CopyPool::next_for_worker(bool spin) {
    if (spin && spin_until([this] { return queued_.load(std::memory_order_acquire) != 0; })) {
        if (Piece *p = try_pop()) return p;
    }
    std::unique_lock<std::mutex> hold(mu_);
    work_cv_.wait(hold, [this] { return head_ != nullptr || stop_; });
    return pop_locked();  // NULL only when stopping with nothing queued
}

void CopyPool::run(Piece *p) {
    std::memcpy(p->dst, p->src, p->len);
    std::atomic<unsigned> *left = p->left;
    // After this decrement the owner may return: touch neither *p nor *left.
    if (left->fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> hold(mu_);
        done_cv_.notify_all();
    }
}

void CopyPool::wait_done(const std::atomic<unsigned> &left) {
    auto done = [&left] { return left.load(std::memory_order_acquire) == 0; };
    if (spin_until(done)) return;
    std::unique_lock<std::mutex> hold(mu_);
    done_cv_.wait(hold, done);
}

void CopyPool::copy(void *dst, const void *src, size_t n, unsigned ways) {
    if (ways > count_ + 1) ways = count_ + 1;
    char *d = static_cast<char *>(dst);
    const char *s = static_cast<const char *>(src);
    // Cut at page boundaries of dst, so that no page (and no cache line) of
    // the destination is written, or faulted in, by two threads.
    const uintptr_t base = reinterpret_cast<uintptr_t>(d);
    const size_t piece = ((n + ways - 1) / (ways ? ways : 1) + kPieceAlign - 1) / kPieceAlign *
                         kPieceAlign;
    Piece local[TF_MAX_DOWNLOAD_THREADS];
    std::atomic<unsigned> left{0};
    unsigned pieces = 0;
    for (size_t start = 0; start < n && pieces < ways; ++pieces) {
        size_t end = n;
        if (pieces + 1 < ways) {
            const uintptr_t cut = (base + start + piece + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
            end = std::min(n, static_cast<size_t>(cut - base));
        }
        local[pieces] = Piece{nullptr, d + start, s + start, end - start, &left};
        if (pieces) local[pieces - 1].next = &local[pieces];
        start = end;
    }
    if (pieces <= 1) {
        std::memcpy(d, s, n);
        return;
    }
    left.store(pieces - 1, std::memory_order_relaxed);
    post(&local[1], &local[pieces - 1], pieces - 1);
    std::memcpy(local[0].dst, local[0].src, local[0].len);
    // Help with whatever is queued (ours or another download's) until our
    // pieces are done; once the queue is empty ours are all running.
    while (left.load(std::memory_order_acquire) != 0) {
        if (Piece *p = try_pop())
            run(p);
        else
            wait_done(left);
    }
}

}  // namespace tf
