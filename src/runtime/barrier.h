/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What a completed stream barrier lets the runtime reclaim.
#pragma once

#include "runtime/runtime_state.h"

namespace tf {

// Called after tf_runtime_sync's stream barrier, with the primary context
// current: runs the workspace retirements the device has passed.
tf_status after_barrier(RuntimeState &state);

}  // namespace tf
