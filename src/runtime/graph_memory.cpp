// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/graph_memory.h"

#include <algorithm>
#include <cstdio>

#include "driver/cuda_status.h"
#include "runtime/call_frame.h"
#include "runtime/device_pool.h"
#include "runtime/runtime_state.h"
#include "runtime/slot_capture.h"

namespace tf {

void GraphAddresses::reserve_one() {
    std::lock_guard<std::mutex> hold(mutex_);
    entries_.reserve(entries_.size() + 1);
}

void GraphAddresses::add(uint64_t base, size_t size, uint64_t capture) {
    std::lock_guard<std::mutex> hold(mutex_);
    entries_.push_back(GraphAddress{base, size, capture, true});
    count_.store(entries_.size(), std::memory_order_release);
}

bool GraphAddresses::find(uint64_t ptr, GraphAddress *out) const {
    if (count_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard<std::mutex> hold(mutex_);
    // The latest first: an address a later capture got again is its.
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
        if (ptr >= it->base && ptr - it->base < it->size) {
            *out = *it;
            return true;
        }
    }
    return false;
}

void GraphAddresses::close(uint64_t capture) {
    std::lock_guard<std::mutex> hold(mutex_);
    for (GraphAddress &a : entries_)
        if (a.capture == capture) a.open = false;
}

void GraphAddresses::drop(uint64_t capture) {
    std::lock_guard<std::mutex> hold(mutex_);
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [&](const GraphAddress &a) { return a.capture == capture; }),
                   entries_.end());
    count_.store(entries_.size(), std::memory_order_release);
}

GraphMemory::~GraphMemory() {
    if (addresses) addresses->drop(capture);
}

void GraphMemory::swap(GraphMemory &other) noexcept {
    allocations.swap(other.allocations);
    std::swap(addresses, other.addresses);
    std::swap(capture, other.capture);
}

size_t GraphMemory::unfreed(uint64_t *bytes) const {
    size_t n = 0;
    *bytes = 0;
    for (const CapturedAllocation &a : allocations) {
        if (a.freed) continue;
        ++n;
        *bytes += a.size;
    }
    return n;
}

void GraphMemory::close() const {
    if (addresses) addresses->close(capture);
}

tf_status fail_graph_address(const char *name, uint64_t ptr, const char *why) {
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                   "%s 0x%llx is memory of a graph: tf_alloc inside a capture made it, and it "
                   "exists only inside each launch of that graph, until the tf_free captured "
                   "with it; %s",
                   name, static_cast<unsigned long long>(ptr), why);
}

tf_status fail_unfreed(const GraphMemory &memory) {
    uint64_t bytes = 0;
    const size_t n = memory.unfreed(&bytes);
    char list[160] = "";
    size_t used = 0, shown = 0;
    for (const CapturedAllocation &a : memory.allocations) {
        if (a.freed || used >= sizeof list) continue;
        if (shown == 3) {
            std::snprintf(list + used, sizeof list - used, ", ...");
            break;
        }
        int w = std::snprintf(list + used, sizeof list - used, "%s%zu bytes at 0x%llx",
                              shown ? ", " : "", a.size, static_cast<unsigned long long>(a.base));
        used += w > 0 ? static_cast<size_t>(w) : 0;
        ++shown;
    }
    return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                   "%zu allocation%s of %llu bytes made in the capture %s not freed in it (%s); "
                   "a graph frees every allocation it makes: tf_free each before the end; the "
                   "capture is over, nothing was kept and the slot works as before",
                   n, n == 1 ? "" : "s", static_cast<unsigned long long>(bytes),
                   n == 1 ? "was" : "were", list);
}

namespace {

// The capture's allocation starting at `ptr`, or nullptr.
CapturedAllocation *captured(GraphMemory &m, uint64_t ptr) {
    for (auto it = m.allocations.rbegin(); it != m.allocations.rend(); ++it)
        if (it->base == ptr && !it->freed) return &*it;
    for (CapturedAllocation &a : m.allocations)
        if (a.base == ptr) return &a;
    return nullptr;
}

}  // namespace

tf_status capture_alloc(CallFrame &frame, size_t bytes, uint64_t *out) {
    RuntimeState &state = frame.state();
    const DriverApi &api = state.api();
    CUmemoryPool pool = nullptr;
    tf_status st = state.device_pool().graph_pool(api, &pool);
    if (st != TF_OK) return st;
    SlotCapture &c = state.slot(frame.slot()).capture;
    std::lock_guard<std::mutex> hold(c.mutex);
    GraphMemory &m = c.contents.memory;
    GraphAddresses &addresses = state.device_pool().graph_addresses();
    m.allocations.reserve(m.allocations.size() + 1);  // may throw: nothing allocated yet
    addresses.reserve_one();
    CUdeviceptr p = 0;
    CUresult r = api.cuMemAllocFromPoolAsync(&p, bytes, pool, frame.stream());
    if (r != CUDA_SUCCESS)
        return fail_cuda(api, "cuMemAllocFromPoolAsync", r,
                         "nothing was added to the capture, which goes on");
    m.addresses = &addresses;
    m.capture = c.id.load(std::memory_order_relaxed);
    m.allocations.push_back(CapturedAllocation{p, bytes, false});
    addresses.add(p, bytes, m.capture);
    *out = p;
    return TF_OK;
}

tf_status capture_free(CallFrame &frame, uint64_t ptr) {
    RuntimeState &state = frame.state();
    SlotCapture &c = state.slot(frame.slot()).capture;
    std::lock_guard<std::mutex> hold(c.mutex);
    CapturedAllocation *a = captured(c.contents.memory, ptr);
    if (a && a->freed)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "ptr 0x%llx was already freed in this capture",
                       static_cast<unsigned long long>(ptr));
    if (!a) {
        GraphAddress other;
        if (state.device_pool().graph_addresses().find(ptr, &other))
            return fail_graph_address("ptr", ptr, "another capture's graph frees it");
        return TF_FAIL(TF_ERROR_RUNTIME_STATE,
                       "slot %d is capturing a graph and ptr 0x%llx was not allocated in this "
                       "capture: a free node would free it again at every launch; free it "
                       "after the capture ends (tf_graph_capture_end)",
                       frame.slot(), static_cast<unsigned long long>(ptr));
    }
    tf_status st = TF_CU(state.api(), cuMemFreeAsync, ptr, frame.stream());
    if (st == TF_OK) a->freed = true;
    return st;
}

}  // namespace tf
