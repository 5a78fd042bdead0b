// SPDX-License-Identifier: MIT OR Apache-2.0
// The tfd_* control interface (tfd_control.h).  Every function takes the
// double's mutex; none of them is logged or counted as a call.
#include <cstring>
#include <memory>

#include "context.h"
#include "state.h"

using namespace tfd;

namespace {

Lock locked()
{
    return Lock(state().mu);
}

constexpr unsigned long kDefaultBackgroundDelayUs = 1000;

bool valid_kind(int kind)
{
    return kind >= 0 && kind < TFD_KIND_COUNT;
}
bool any_device(int device)
{
    return device >= 0 && device < kMaxDevices;
}

void add_rule(const char *entry, unsigned long nth, int code, unsigned long times, bool after)
{
    if (entry == nullptr)
        return;
    FaultRule r;
    r.entry = canonical(entry);
    r.nth = nth;
    r.times = times;
    r.code = code;
    r.after = after;
    state().rules.push_back(r);
}

// The stream key of a stream handle for the controls: NULL is the legacy
// stream of the calling thread's current context; 0 when unknown.
uint64_t control_key(void *stream)
{
    if (stream == nullptr) {
        uint64_t ctx = current_handle();
        return ctx == 0 ? 0 : legacy_key(ctx);
    }
    return state().streams.count(handle_of(stream)) != 0 ? handle_of(stream) : 0;
}

void set_execution(int mode)
{
    State &s = state();
    if (mode != TFD_EXEC_SYNC && mode != TFD_EXEC_DEFERRED && mode != TFD_EXEC_BACKGROUND)
        return;
    s.exec = mode;
    execution_changed();
}

}  // namespace

extern "C" {

void tfd_reset(void)
{
    Lock l = locked();
    State &s = state();
    s.rules.clear();
    clear_entry_delays();
    s.hidden.clear();
    s.log.clear();
    s.calls.clear();
    s.requested_version.clear();
    s.requested_flags.clear();
    std::memset(s.reclaimed, 0, sizeof s.reclaimed);
    s.device_count = 1;
    for (DeviceConfig &d : s.devices)
        d = DeviceConfig();
    s.all_attributes.clear();
    drain_all();
    pools_reset_counters();
    s.query_progress = 0;
    s.background_delay = std::chrono::microseconds(kDefaultBackgroundDelayUs);
    set_execution(TFD_EXEC_DEFERRED);
}

// ---- devices ---------------------------------------------------------------

void tfd_set_devices(int count)
{
    Lock l = locked();
    state().device_count = count < 0 ? 0 : count > kMaxDevices ? kMaxDevices : count;
}

void tfd_set_attribute(int device, int attribute, int value)
{
    Lock l = locked();
    if (device == -1)
        state().all_attributes[attribute] = value;
    else if (any_device(device))
        state().devices[device].attributes[attribute] = value;
}

void tfd_set_peer_access(int device, int peer, int can_access)
{
    Lock l = locked();
    if (any_device(device) && any_device(peer))
        state().devices[device].peer[peer] = can_access != 0;
}

void tfd_set_total_mem(int device, size_t bytes)
{
    Lock l = locked();
    for (int d = 0; d < kMaxDevices; ++d)
        if (device == -1 || device == d)
            state().devices[d].total_mem = bytes;
}

void tfd_set_driver_version(int version)
{
    Lock l = locked();
    state().driver_version = version;
}

void tfd_set_initialized(int on)
{
    Lock l = locked();
    state().initialized = on != 0;
}

// ---- fault injection ---------------------------------------------------------

void tfd_fail(const char *entry, unsigned long nth, int code, unsigned long times)
{
    Lock l = locked();
    add_rule(entry, nth, code, times, false);
}

void tfd_fail_after(const char *entry, unsigned long nth, int code, unsigned long times)
{
    Lock l = locked();
    add_rule(entry, nth, code, times, true);
}

void tfd_set_entry_delay_us(const char *entry, unsigned long microseconds)
{
    if (entry != nullptr)
        set_entry_delay(entry, microseconds);
}

void tfd_clear_faults(void)
{
    Lock l = locked();
    state().rules.clear();
}

void tfd_hide(const char *entry)
{
    Lock l = locked();
    if (entry != nullptr)
        state().hidden.insert(entry);
}

void tfd_poison_context(void *context, int code)
{
    Lock l = locked();
    if (Context *c = find_context(handle_of(context)))
        c->poison = code;
}

int tfd_context_poison(void *context)
{
    Lock l = locked();
    const Context *c = find_context(handle_of(context));
    return c == nullptr ? 0 : c->poison;
}

// ---- observation -------------------------------------------------------------

unsigned long tfd_calls(const char *entry)
{
    Lock l = locked();
    auto it = state().calls.find(canonical(entry));
    return it == state().calls.end() ? 0 : it->second;
}

int tfd_requested_version(const char *entry)
{
    Lock l = locked();
    auto it = state().requested_version.find(entry == nullptr ? "" : entry);
    return it == state().requested_version.end() ? -1 : it->second;
}

long long tfd_requested_flags(const char *entry)
{
    Lock l = locked();
    auto it = state().requested_flags.find(entry == nullptr ? "" : entry);
    return it == state().requested_flags.end() ? -1 : it->second;
}

size_t tfd_log_count(void)
{
    Lock l = locked();
    return state().log.size();
}

const char *tfd_log_name(size_t index)
{
    Lock l = locked();
    const auto &log = state().log;
    return index < log.size() ? log[index] : nullptr;
}

size_t tfd_log_format(char *buf, size_t cap, size_t from)
{
    Lock l = locked();
    std::string joined;
    const auto &log = state().log;
    for (size_t i = from; i < log.size(); ++i) {
        if (i > from)
            joined += ',';
        joined += log[i];
    }
    if (buf != nullptr && cap > 0) {
        size_t n = joined.size() < cap - 1 ? joined.size() : cap - 1;
        std::memcpy(buf, joined.data(), n);
        buf[n] = '\0';
    }
    return joined.size();
}

void tfd_log_clear(void)
{
    Lock l = locked();
    state().log.clear();
}

long tfd_live(int kind)
{
    Lock l = locked();
    return valid_kind(kind) ? state().live[kind] : 0;
}

long tfd_reclaimed(int kind)
{
    Lock l = locked();
    return valid_kind(kind) ? state().reclaimed[kind] : 0;
}

int tfd_primary_refcount(int device)
{
    Lock l = locked();
    return any_device(device) ? primary_context(device).refcount : 0;
}

void *tfd_primary_context(int device)
{
    Lock l = locked();
    return any_device(device) ? handle_ptr<void *>(primary_context(device).handle) : nullptr;
}

void *tfd_current_context(void)
{
    Lock l = locked();
    return handle_ptr<void *>(current_handle());
}

unsigned tfd_stream_flags(void *stream)
{
    Lock l = locked();
    auto it = state().streams.find(handle_of(stream));
    return it == state().streams.end() ? ~0u : it->second.flags;
}

void *tfd_stream_context(void *stream)
{
    Lock l = locked();
    auto it = state().streams.find(handle_of(stream));
    return it == state().streams.end() ? nullptr : handle_ptr<void *>(it->second.ctx);
}

unsigned tfd_host_alloc_flags(void *host_ptr)
{
    Lock l = locked();
    const auto &m = state().host_allocs;
    uintptr_t p = reinterpret_cast<uintptr_t>(host_ptr);
    auto it = m.upper_bound(p);
    if (it == m.begin())
        return ~0u;
    --it;
    return p - it->first < it->second.size ? it->second.flags : ~0u;
}

size_t tfd_host_allocs(void **ptrs, unsigned *flags, size_t cap)
{
    Lock l = locked();
    size_t i = 0;
    for (const auto &h : state().host_allocs) {
        if (i < cap && ptrs != nullptr)
            ptrs[i] = reinterpret_cast<void *>(h.first);
        if (i < cap && flags != nullptr)
            flags[i] = h.second.flags;
        ++i;
    }
    return i;
}

int tfd_peer_enabled(void *context, void *peer)
{
    Lock l = locked();
    const Context *c = find_context(handle_of(context));
    return c != nullptr && c->peers.count(handle_of(peer)) != 0 ? 1 : 0;
}

int tfd_func_attribute(void *function, int attribute)
{
    Lock l = locked();
    auto it = state().functions.find(handle_of(function));
    if (it == state().functions.end())
        return -1;
    auto a = it->second.attributes.find(attribute);
    return a == it->second.attributes.end() ? -1 : a->second;
}

// ---- contexts and memory for tests -------------------------------------------

void *tfd_create_context(int device)
{
    Lock l = locked();
    return valid_device(device) ? handle_ptr<void *>(create_context(device)) : nullptr;
}

void tfd_destroy_context(void *context)
{
    Lock l = locked();
    destroy_context(handle_of(context));
}

void tfd_set_current(void *context)
{
    Lock l = locked();
    set_current_handle(handle_of(context));
}

uint64_t tfd_device_alloc(int device, size_t bytes)
{
    Lock l = locked();
    CUdeviceptr dptr = 0;
    if (!valid_device(device) || bytes == 0)
        return 0;
    return create_alloc(device, 0, bytes, &dptr) == CUDA_SUCCESS ? dptr : 0;
}

void tfd_device_free(uint64_t dptr)
{
    Lock l = locked();
    auto it = state().device_allocs.find(dptr);
    if (it != state().device_allocs.end())
        release_alloc(it);
}

int tfd_device_write(uint64_t dptr, const void *src, size_t bytes)
{
    Lock l = locked();
    uint64_t base = 0;
    DeviceAlloc *a = find_alloc(dptr, bytes, &base);
    if (a == nullptr)
        return -1;
    std::memcpy(a->host + (dptr - base), src, bytes);
    return 0;
}

int tfd_device_read(uint64_t dptr, void *dst, size_t bytes)
{
    Lock l = locked();
    uint64_t base = 0;
    DeviceAlloc *a = find_alloc(dptr, bytes, &base);
    if (a == nullptr)
        return -1;
    std::memcpy(dst, a->host + (dptr - base), bytes);
    return 0;
}

// ---- execution of stream work ---------------------------------------------------

void tfd_set_execution(int mode)
{
    Lock l = locked();
    set_execution(mode);
}

int tfd_execution(void)
{
    Lock l = locked();
    return state().exec;
}

void tfd_set_background_delay_us(unsigned long microseconds)
{
    Lock l = locked();
    state().background_delay = std::chrono::microseconds(microseconds);
    execution_changed();
}

void tfd_set_query_progress(unsigned long ops)
{
    Lock l = locked();
    state().query_progress = ops;
}

unsigned long tfd_step(void *stream, unsigned long ops)
{
    Lock l = locked();
    uint64_t key = control_key(stream);
    return key == 0 ? 0 : static_cast<unsigned long>(step(key, ops));
}

void tfd_drain_all(void)
{
    Lock l = locked();
    drain_all();
}

unsigned long tfd_pending(void *stream)
{
    Lock l = locked();
    uint64_t key = control_key(stream);
    return key == 0 ? 0 : static_cast<unsigned long>(pending(key));
}

unsigned long tfd_pending_total(void)
{
    Lock l = locked();
    return static_cast<unsigned long>(pending_total());
}

void tfd_set_async_pending(int on)
{
    Lock l = locked();
    set_execution(on != 0 ? TFD_EXEC_DEFERRED : TFD_EXEC_SYNC);
}

void tfd_complete_all(void)
{
    Lock l = locked();
    drain_all();
}

// ---- cuBLAS handles ------------------------------------------------------------

int tfd_cublas_get(void *handle, struct tfd_cublas_info *out)
{
    Lock l = locked();
    auto it = state().cublas.find(handle_of(handle));
    if (it == state().cublas.end() || out == nullptr)
        return -1;
    *out = it->second;
    return 0;
}

void *tfd_cublas_stream(void *handle)
{
    Lock l = locked();
    auto it = state().cublas.find(handle_of(handle));
    return it == state().cublas.end() ? nullptr : it->second.stream;
}

int tfd_cublas_workspace(void *handle, void **ptr, size_t *size)
{
    Lock l = locked();
    auto it = state().cublas.find(handle_of(handle));
    if (it == state().cublas.end())
        return -1;
    if (ptr != nullptr)
        *ptr = it->second.workspace;
    if (size != nullptr)
        *size = it->second.workspace_size;
    return 0;
}

// ---- used by the companion doubles ---------------------------------------------

int tfd_enter_ex(const char *entry, int *after_code)
{
    Lock l = locked();  // enter_locked never throws
    int before = 0, after = 0;
    enter_locked(entry, &before, &after);
    if (after_code != nullptr)
        *after_code = after;
    else if (before == 0)
        before = after;
    return before;
}

int tfd_enter(const char *entry)
{
    return tfd_enter_ex(entry, nullptr);
}

void *tfd_translate(uint64_t dptr, size_t bytes)
{
    Lock l = locked();
    uint64_t base = 0;
    DeviceAlloc *a = find_alloc(dptr, bytes, &base);
    return a == nullptr ? pool_block_range(dptr, bytes) : a->host + (dptr - base);
}

void tfd_lock(void)
{
    state().mu.lock();
}
void tfd_unlock(void)
{
    state().mu.unlock();
}

void tfd_count_live(int kind, long delta)
{
    Lock l = locked();
    if (valid_kind(kind))
        state().live[kind] += delta;
}

int tfd_context_status(void)
{
    Lock l = locked();
    return need_context(nullptr);
}

unsigned long tfd_capture_nodes(void *stream)
{
    Lock l = locked();
    const Capture *c = capture_of(control_key(stream));
    return c == nullptr ? 0 : static_cast<unsigned long>(c->nodes.size());
}

int tfd_stream_status(void *stream)
{
    Lock l = locked();
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    return use_stream(static_cast<CUstream>(stream), *cur, nullptr);
}

int tfd_enqueue(void *stream, const char *what, int (*run)(void *arg), void *arg,
                void (*drop)(void *arg), struct tfd_ticket *ticket)
{
    Lock l = locked();
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(static_cast<CUstream>(stream), &cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (run == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    // Owned by the op from here: dropped once, whether the op runs or not.
    std::shared_ptr<void> owned(arg, [drop](void *p) {
        if (drop != nullptr)
            drop(p);
    });
    Op op;
    op.what = what != nullptr ? what : "tfd_enqueue";
    op.body = [run, owned](Context &) { return run(owned.get()); };
    uint64_t seq = enqueue(key, cur->handle, std::move(op));
    if (ticket != nullptr)
        *ticket = tfd_ticket{key, seq};
    return CUDA_SUCCESS;
}

int tfd_reached(const struct tfd_ticket *ticket)
{
    Lock l = locked();
    return ticket == nullptr || reached(ticket->stream_key, ticket->seq) ? 1 : 0;
}

int tfd_advance(const struct tfd_ticket *ticket)
{
    Lock l = locked();
    return ticket == nullptr || advance(ticket->stream_key, ticket->seq) ? 0 : -1;
}

void *tfd_cublas_register(void)
{
    Lock l = locked();
    Context *cur = nullptr;
    if (need_context(&cur) != CUDA_SUCCESS)
        return nullptr;
    State &s = state();
    uint64_t h = make_handle(Tag::cublas);
    tfd_cublas_info info = {};
    info.context = handle_ptr<void *>(cur->handle);
    s.cublas[h] = info;
    ++s.live[TFD_CUBLAS_HANDLES];
    return handle_ptr<void *>(h);
}

int tfd_cublas_unregister(void *handle)
{
    Lock l = locked();
    State &s = state();
    if (s.cublas.erase(handle_of(handle)) == 0)
        return -1;
    --s.live[TFD_CUBLAS_HANDLES];
    return 0;
}

struct tfd_cublas_info *tfd_cublas_lookup(void *handle)
{
    Lock l = locked();
    auto it = state().cublas.find(handle_of(handle));
    return it == state().cublas.end() ? nullptr : &it->second;
}

}  // extern "C"
