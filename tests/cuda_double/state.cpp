// SPDX-License-Identifier: MIT OR Apache-2.0
// Registry, mutex, call log, counters and fault rules of the driver double.
#include "state.h"
#include "host_pages.h"

#include <atomic>
#include <cstring>
#include <thread>

namespace tfd {

State &state()
{
    // Never destroyed: threads may still call in while statics are torn down.
    static State *s = new State();
    return *s;
}

uint64_t make_handle(Tag tag)
{
    State &s = state();
    uint64_t id = s.next_id++;
    return (static_cast<uint64_t>(tag) << 60) | (id << 4);
}

std::string canonical(const char *entry)
{
    if (entry == nullptr)
        return std::string();
    if (std::strcmp(entry, "cuGetProcAddress_v2") == 0)
        return "cuGetProcAddress";
    return entry;
}

// Set while some entry has a delay: the common case costs one load.
static std::atomic<bool> g_any_delay{false};

void set_entry_delay(const char *entry, unsigned long microseconds)
{
    Lock l(state().mu);
    std::map<std::string, unsigned long> &d = state().delays;
    if (microseconds == 0)
        d.erase(canonical(entry));
    else
        d[canonical(entry)] = microseconds;
    g_any_delay.store(!d.empty(), std::memory_order_relaxed);
}

void clear_entry_delays()
{
    Lock l(state().mu);
    state().delays.clear();
    g_any_delay.store(false, std::memory_order_relaxed);
}

void delay_entry(const char *entry) noexcept
{
    if (!g_any_delay.load(std::memory_order_relaxed))
        return;
    unsigned long us = 0;
    try {
        Lock l(state().mu);
        auto it = state().delays.find(canonical(entry));
        if (it != state().delays.end())
            us = it->second;
    } catch (...) {
        return;  // no memory for the name: no delay
    }
    if (us != 0)
        std::this_thread::sleep_for(std::chrono::microseconds(us));
}

bool is_driver_entry(const std::string &name)
{
    return name.compare(0, 6, "cublas") != 0 && name.compare(0, 5, "nvrtc") != 0 &&
           name.compare(0, 4, "nccl") != 0;
}

// A rule fires for the matching calls number nth .. nth+times-1 it has seen.
static bool rule_fires(const FaultRule &r)
{
    unsigned long nth = r.nth == 0 ? 1 : r.nth;
    if (r.seen < nth)
        return false;
    return r.times == 0 || r.seen < nth + r.times;
}

static void record_call(const char *entry, int *before, int *after)
{
    State &s = state();
    std::string name = canonical(entry);
    const char *interned = s.names.insert(name).first->c_str();
    if (s.log.size() < kMaxLog)
        s.log.push_back(interned);
    ++s.calls[name];

    bool driver = is_driver_entry(name);
    bool fired = false;
    // Every matching rule counts the call; the first one that fires decides.
    for (FaultRule &r : s.rules) {
        if (r.entry != name && !(r.entry == "*" && driver))
            continue;
        ++r.seen;
        if (fired || !rule_fires(r))
            continue;
        fired = true;
        (r.after ? *after : *before) = r.code;
    }
}

void enter_locked(const char *entry, int *before, int *after) noexcept
{
    try {
        record_call(entry, before, after);
    } catch (...) {
        // Out of memory for the bookkeeping: let the call run unrecorded.
    }
}

CUresult need_init()
{
    return state().initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

// The current context is per thread, as in the real driver.  It holds a
// handle, not a pointer, so a destroyed context is simply not found.
static thread_local uint64_t t_current = 0;

uint64_t current_handle()
{
    return t_current;
}
void set_current_handle(uint64_t ctx)
{
    t_current = ctx;
}

Context *find_context(uint64_t handle)
{
    auto &m = state().contexts;
    auto it = m.find(handle);
    return it == m.end() ? nullptr : &it->second;
}

CUresult need_context(Context **out)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    Context *ctx = find_context(t_current);
    if (ctx == nullptr || !ctx->active())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx->poison != 0)
        return static_cast<CUresult>(ctx->poison);
    if (out != nullptr)
        *out = ctx;
    return CUDA_SUCCESS;
}

CUresult lookup_stream(CUstream stream, const Context &cur, uint64_t *key)
{
    if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
        if (key != nullptr)
            *key = legacy_key(cur.handle);
        return CUDA_SUCCESS;
    }
    State &s = state();
    auto it = s.streams.find(handle_of(stream));
    if (it == s.streams.end())
        return CUDA_ERROR_INVALID_HANDLE;
    if (it->second.ctx != cur.handle)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (key != nullptr)
        *key = it->first;
    return CUDA_SUCCESS;
}

CUresult use_stream(CUstream stream, const Context &cur, uint64_t *key)
{
    uint64_t k = 0;
    CUresult rc = lookup_stream(stream, cur, &k);
    if (rc == CUDA_SUCCESS)
        rc = capture_gate(k);
    if (rc == CUDA_SUCCESS && key != nullptr)
        *key = k;
    return rc;
}

// Erase every object of `m` that belongs to context `ctx`, counting them.
template <class Map>
static void reclaim_objects(Map &m, uint64_t ctx, int kind)
{
    State &s = state();
    for (auto it = m.begin(); it != m.end();) {
        if (it->second.ctx == ctx) {
            it = m.erase(it);
            --s.live[kind];
            ++s.reclaimed[kind];
        } else {
            ++it;
        }
    }
}

void reclaim_context(Context &ctx)
{
    State &s = state();
    drop_context_queues(ctx.handle);
    reclaim_graphs(ctx.handle);
    reclaim_objects(s.streams, ctx.handle, TFD_STREAMS);
    reclaim_objects(s.events, ctx.handle, TFD_EVENTS);
    reclaim_objects(s.modules, ctx.handle, TFD_MODULES);
    for (auto it = s.functions.begin(); it != s.functions.end();)
        it = it->second.ctx == ctx.handle ? s.functions.erase(it) : std::next(it);
    for (auto it = s.device_allocs.begin(); it != s.device_allocs.end();) {
        auto next = std::next(it);
        if (it->second.ctx == ctx.handle) {
            ++s.reclaimed[TFD_DEVICE_ALLOCS];
            release_alloc(it);
        }
        it = next;
    }
    // Registered host memory is unregistered with its context, and the
    // context's cuMemHostAlloc blocks are freed, as in CUDA.
    for (auto it = s.host_registered.begin(); it != s.host_registered.end();)
        it = it->second.ctx == ctx.handle ? s.host_registered.erase(it) : std::next(it);
    reclaim_host_blocks(ctx.handle);
    for (auto &other : s.contexts)
        other.second.peers.erase(ctx.handle);
    ctx.poison = 0;
    ctx.peers.clear();
}

}  // namespace tfd
