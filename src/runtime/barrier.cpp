// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/barrier.h"

#include "driver/cuda_status.h"
#include "runtime/retirement_queue.h"

namespace tf {

// The barrier proved the caller's slot done up to now, so its retirements
// queued before it all complete here; other slots are only polled (their
// finished retirements run, nothing waits for them).
tf_status after_barrier(RuntimeState &state) { return state.retirements().poll(state.api()); }

}  // namespace tf
