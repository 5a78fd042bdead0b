/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// How a bulk download into pageable memory is cut up and handed to the copy
// threads.  The library runs with kDownloadPlan; bench/tune_download sweeps
// other plans through the same code, and tools/tuning/pick_download_defaults.py
// turns its log into new values for the constants below (and for the
// header's TF_DEFAULT_DOWNLOAD_THREADS / TF_DEFAULT_DOWNLOAD_CHUNK_BYTES).
#pragma once

#include <chrono>
#include <cstddef>

namespace tf {

// Page-locked staging buffers per stream slot (the ring's depth).
constexpr int kStagingDepth = 3;
// Steps are about sqrt(len * kStepScale) bytes, at most one staging buffer:
// the first step's device copy is exposed and every step costs a few driver
// calls, so the best step grows with the square root of the length.
constexpr size_t kStepScale = size_t(1024) << 10;
// Host threads are not given less than this much of a step each.
constexpr size_t kMinPiece = size_t(16) << 10;
// Pieces per copying thread in a step: more than one lets threads that
// finish early take the pieces of a thread that is slow (page faults).
constexpr unsigned kPiecesPerThread = 1;
// Fault a never-touched destination in with MADV_POPULATE_WRITE (one call
// per piece) rather than one trap per page (transfer/fresh_pages.h).
constexpr bool kPopulateFresh = false;
// Queue the next device copy after handing a landed step to the threads
// (its driver calls overlap their copying) rather than after the step is
// copied out.
constexpr bool kIssueAfterPost = true;
// How long copy threads and waiting callers spin before they sleep.  The
// H200 tuning run measured 1000 us slightly faster than 200 us, but every
// copy thread would then burn a millisecond of CPU after each download,
// taken from the application's own threads: 200 us is the default.
constexpr std::chrono::microseconds kCopySpin{200};

struct DownloadPlan {
    int depth = kStagingDepth;  // staging buffers in flight, 2 .. StagingRing::kMaxDepth
    size_t step_scale = kStepScale;
    size_t min_piece = kMinPiece;
    unsigned pieces_per_thread = kPiecesPerThread;
    bool populate_fresh = kPopulateFresh;
    bool issue_after_post = kIssueAfterPost;
};

}  // namespace tf
