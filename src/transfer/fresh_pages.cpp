// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/fresh_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace tf {
namespace {

uintptr_t page_bytes() {
    static const uintptr_t bytes = [] {
        const long n = sysconf(_SC_PAGESIZE);
        return n > 0 ? static_cast<uintptr_t>(n) : uintptr_t(4096);
    }();
    return bytes;
}

bool probe_populate() {
#ifdef MADV_POPULATE_WRITE
    const size_t n = page_bytes();
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    const bool ok = madvise(p, n, MADV_POPULATE_WRITE) == 0;
    munmap(p, n);
    return ok;
#else
    return false;
#endif
}

}  // namespace

bool can_populate_pages() {
    // Racing first callers may both probe; they get the same answer.
    static std::atomic<int> known{-1};
    int v = known.load(std::memory_order_relaxed);
    if (v < 0) {
        v = probe_populate() ? 1 : 0;
        known.store(v, std::memory_order_relaxed);
    }
    return v == 1;
}

bool looks_untouched(const void *p, size_t n) {
    const uintptr_t page = page_bytes();
    const uintptr_t start = reinterpret_cast<uintptr_t>(p);
    const uintptr_t first = (start + page - 1) & ~(page - 1);
    if (first < start || first + page > start + n) return false;
    unsigned char resident = 1;
    if (mincore(reinterpret_cast<void *>(first), page, &resident) != 0) return false;
    return (resident & 1) == 0;
}

void populate_for_write(void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
    if (n == 0) return;
    const uintptr_t page = page_bytes();
    const uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
    (void)madvise(reinterpret_cast<void *>(start), end - start, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)n;
#endif
}

}  // namespace tf
