/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// SlotCapture: a slot's open graph capture and what it gathers
// (NOTE [capture] in src/README.md); CaptureContents: what a capture
// gathered, which its graph then keeps.
#pragma once

#include <atomic>
#include <bitset>
#include <mutex>
#include <vector>

#include "runtime/graph_memory.h"
#include "tenferro_gpu.h"
#include "transfer/host_pool.h"

struct tf_event;

namespace tf {

// What a capture's work needs at each launch of its graph: the page-locked
// ranges its copies use (each launch records their uses), the events of its
// record and wait nodes (one reference per node, dropped with the contents),
// the slots it waits for (each launch marks their work first), the memory
// it allocated (its addresses known as the graph's while it lives), and
// whether its cuBLAS or cuBLASLt work uses the capturing slot's handles and
// workspace (each launch is ordered with that slot's use of them,
// runtime/graph_workspace.h).
struct CaptureContents {
    std::vector<HostPool::Held> host;
    std::vector<tf_event *> events;
    std::bitset<TF_MAX_STREAM_SLOTS> waits;
    GraphMemory memory;       // tf_alloc in the capture: the graph's allocation nodes
    int workspace_slot = -1;  // the slot whose workspace its work uses; -1: none

    CaptureContents() = default;
    CaptureContents(CaptureContents &&other) noexcept { swap(other); }
    CaptureContents &operator=(CaptureContents &&other) noexcept {
        CaptureContents gone(std::move(*this));
        swap(other);
        return *this;
    }
    ~CaptureContents();
    void swap(CaptureContents &other) noexcept {
        host.swap(other.host);
        events.swap(other.events);
        std::swap(waits, other.waits);
        memory.swap(other.memory);
        std::swap(workspace_slot, other.workspace_slot);
    }
};

// INVARIANT: id is nonzero exactly while the slot's CaptureGate says it
// captures (set before the capture begins, cleared once it ended); the
// rest is guarded by `mutex` and meaningful only while id is nonzero.
struct SlotCapture {
    std::atomic<uint64_t> id{0};  // the open capture's number (process-wide, never reused)
    std::mutex mutex;
    long thread = 0;  // OS thread that began it, for messages
    CaptureContents contents;
};

}  // namespace tf
