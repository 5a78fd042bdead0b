/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Graph memory: tf_alloc and tf_free inside a capture become the graph's
// allocation and free nodes (NOTE [graph memory] in src/README.md).
//
// GraphAddresses knows, per device, every address a capture allocated, for
// as long as the capture or the graph made from it lives, so that the calls
// outside it refuse such an address with a message instead of handing it
// to the driver.  GraphMemory is what one capture allocated; its addresses
// leave GraphAddresses when it goes (a failed or aborted capture, the
// graph's last release, an update that replaced it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tenferro_gpu.h"

namespace tf {

class CallFrame;

struct GraphAddress {
    uint64_t base = 0;
    size_t size = 0;
    uint64_t capture = 0;  // the capture that allocated it (its number)
    bool open = false;     // that capture has not ended yet
};

class GraphAddresses {
public:
    // Room for one more entry: may throw std::bad_alloc; add then cannot.
    void reserve_one();
    void add(uint64_t base, size_t size, uint64_t capture);
    // True, with *out, when `ptr` lies in a graph's allocation.  One
    // atomic load when no graph memory exists.
    bool find(uint64_t ptr, GraphAddress *out) const;
    void close(uint64_t capture);
    void drop(uint64_t capture);

private:
    mutable std::mutex mutex_;
    std::vector<GraphAddress> entries_;
    std::atomic<size_t> count_{0};
};

struct CapturedAllocation {
    uint64_t base = 0;
    size_t size = 0;
    bool freed = false;  // its free node is captured too
};

class GraphMemory {
public:
    GraphMemory() = default;
    GraphMemory(const GraphMemory &) = delete;
    GraphMemory &operator=(const GraphMemory &) = delete;
    ~GraphMemory();
    void swap(GraphMemory &other) noexcept;

    bool empty() const { return allocations.empty(); }
    // The allocations without a free node, and their bytes.
    size_t unfreed(uint64_t *bytes) const;
    // The capture ended: its addresses are a graph's now.
    void close() const;

    std::vector<CapturedAllocation> allocations;
    GraphAddresses *addresses = nullptr;  // the device's, once something was allocated
    uint64_t capture = 0;
};

// tf_alloc and tf_free on a slot that captures (the frame entered).
tf_status capture_alloc(CallFrame &frame, size_t bytes, uint64_t *out);
tf_status capture_free(CallFrame &frame, uint64_t ptr);
// The end of a capture that left allocations unfreed: TF_ERROR_RUNTIME_STATE
// naming them.
tf_status fail_unfreed(const GraphMemory &memory) __attribute__((cold, noinline));
// `name` 0x... lies in a graph's memory, outside the capture that made it:
// TF_ERROR_INVALID_ARGUMENT; `why` says what the call cannot do with it.
tf_status fail_graph_address(const char *name, uint64_t ptr, const char *why)
    __attribute__((cold, noinline));

}  // namespace tf
