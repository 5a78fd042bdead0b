// Bulk downloads into pageable memory through the slot's staging ring.
//
// The driver's own pageable path copies through a small internal buffer with
// one thread and faults the destination's pages in one at a time.  Here the
// device copies chunk i+1 into one page-locked buffer of the slot while host
// threads copy chunk i out of the other, in parallel pieces, so page faults
// and memory bandwidth are spread over several cores.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "runtime_state.h"

namespace tf {

// Pageable downloads up to this size use the driver's copy: staging would
// not pay for itself.
constexpr size_t kStagedDownloadAbove = size_t(64) << 10;

// Copies [src, src + len) into pageable `dst` on `stream` (the stream of
// `slot`, with the primary context current), taking the slot lock.  On
// failure the ring is abandoned (leaked) and `dst` may be partly written;
// no host thread touches `dst` once this returns.
tf_status download_staged(RuntimeState &state, const char *op, int slot, CUstream stream,
                          uint64_t src, void *dst, size_t len);

}  // namespace tf
