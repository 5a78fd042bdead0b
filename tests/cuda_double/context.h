/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Context helpers shared by the entry points and the control interface.
// All of them expect the state mutex to be held.
#ifndef TFD_CONTEXT_H
#define TFD_CONTEXT_H

#include "state.h"

namespace tfd {

// The primary context of a device (created on first use; its handle never
// changes).  `device` must be in [0, kMaxDevices).
Context &primary_context(int device);
// A non-primary context, always active; returns its handle.
uint64_t create_context(int device);
// Destroy a non-primary context and reclaim its objects (primary: ignored).
void destroy_context(uint64_t handle);

}  // namespace tfd

#endif
