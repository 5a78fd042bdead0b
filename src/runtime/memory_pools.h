/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Whether device memory comes from the device's memory pool (stream-ordered
// cuMemAllocAsync / cuMemFreeAsync) or from plain cuMemAlloc / cuMemFree.
#pragma once

#include "runtime/runtime_state.h"

namespace tf {

// *out: the device reports CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED and the
// driver provides both stream-ordered entry points.  Asked once per runtime
// (no context needed); a failed query is returned and asked again next time.
tf_status memory_pools_supported(const RuntimeState &state, bool *out);

}  // namespace tf
