/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The launches of a graph whose captured cuBLAS or cuBLASLt work uses the
// capturing slot's handles and workspace (CaptureContents::workspace_slot),
// NOTE [graph workspace] in src/README.md.
//
// Everything else that uses a slot's workspace is queued on the slot's
// stream under its lock (the enqueue calls).  A launch of such a graph
// holds that slot's lock too, so no use of the workspace is queued
// meanwhile; on the slot itself the stream orders it, and from another
// slot it is ordered both ways with the slot's stream by events.
#pragma once

#include <cuda.h>

#include "runtime/call_frame.h"

namespace tf {

// The lock of the slot whose workspace a graph's work uses, held from before
// the graph's lock until the launch is queued, or nothing when the calling
// thread holds it already (a launch from a callback running on that slot).
class WorkspaceLock {
public:
    WorkspaceLock() = default;
    ~WorkspaceLock() { drop(); }
    WorkspaceLock(const WorkspaceLock &) = delete;
    WorkspaceLock &operator=(const WorkspaceLock &) = delete;

    // Holds slot `slot`'s lock (-1: none is needed).  TF_ERROR_RUNTIME_STATE,
    // holding nothing, when the thread holds another slot's lock: it could
    // then wait for a thread that waits for it.
    tf_status take(RuntimeState &state, int slot);
    void drop();
    // The slot taken, -1 for none.
    int slot() const { return slot_; }

private:
    SlotLock *locked_ = nullptr;  // NULL when nothing was locked here
    int slot_ = -1;
};

// Queues `exec` on the frame's slot (entered, not capturing), its work
// using slot `owner`'s workspace, owner's lock held by this thread.  On
// owner itself a plain launch; from another slot the launch waits for
// owner's work queued so far, and owner's later work waits for the launch
// (a failure to queue that wait is replaced by a host wait for the
// launch).  TF_ERROR_RUNTIME_STATE, queueing nothing, while owner captures.
tf_status launch_with_workspace(CallFrame &frame, int owner, CUgraphExec exec);

}  // namespace tf
