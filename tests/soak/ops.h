/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What the operation files share: each worker's buffers and the checked
// building blocks (download and compare, launch and compare, SGEMM and
// compare, a retired workspace).
#pragma once

#include <string>
#include <vector>

#include "kernels.h"
#include "soak.h"

namespace soak {

constexpr size_t kSmall = 4096;           // device buffers for small copies and kernels
constexpr size_t kBig = size_t(1) << 20;  // staged downloads: up to 1 MiB
constexpr size_t kStagedAbove = size_t(64)
                                << 10;  // the library stages pageable downloads above this
constexpr size_t kPinned = size_t(256) << 10;
constexpr int kDim = 8;  // SGEMM: 8 x 8 matrices
constexpr size_t kMat = kDim * kDim * sizeof(float);
constexpr size_t kAlphaOffset = 3 * kMat;  // A, B, C, then alpha and beta
constexpr size_t kMatBytes = 3 * kMat + 2 * sizeof(float);

// A worker's own memory on the shared runtime (made at its start, used from
// any slot, since every iteration ends with its slot synchronized).
struct WorkerBuffers {
    uint64_t small = 0, small2 = 0, big = 0, mats = 0;
    std::vector<unsigned char> host, expect;  // pageable, kBig each
    void *pinned = nullptr;                   // page-locked (the raw driver's), kPinned
};

// A memset the caller queues itself on a slot stream.
struct Memset {
    World *w;
    void *stream;
    uint64_t dst;
    unsigned char value;
    size_t n;
    bool in_primary = false;
};

void fill_pattern(unsigned char *p, size_t n, uint32_t seed);

// A handle of the shared runtime bound to a random slot (NULL on failure).
tf_runtime *bind_random(World &w, Rng &rng);

// Downloads n bytes at src through h into b.host and compares byte i with
// expect(i).
template <class Expect>
void download_and_check(World &w, tf_runtime *h, WorkerBuffers &b, uint64_t src, size_t n,
                        Expect &&expect, const char *what) {
    if (!ok(w, "tf_download", tf_download(h, src, b.host.data(), n))) return;
    for (size_t i = 0; i < n; ++i)
        if (b.host[i] != expect(i))
            return mismatch(w, "verify download",
                            std::string(what) + ": byte " + std::to_string(i) + " of " +
                                std::to_string(n) + " differs");
}

// Launches `fn` (tfd_fill_u32) over b.small through h and checks the words.
void launch_and_check(World &w, tf_runtime *h, WorkerBuffers &b, void *fn, Rng &rng,
                      uint32_t shared_bytes);

// SGEMM of random small integer matrices at `mats` through h, the result
// checked one time in four.
void sgemm_and_check(World &w, tf_runtime *h, uint64_t mats, Rng &rng, bool device_mode);

// Allocates a workspace with the raw driver, queues a memset on it on h's
// slot and retires it; its release frees it and counts in `tally`.
void retire_workspace(World &w, tf_runtime *h, Tally *tally, size_t bytes);

}  // namespace soak
