// Streams and events.  Work is done when it is enqueued, so streams only
// carry a context and flags.  Events model completion: with async pending on
// (tfd_set_async_pending) an event recorded from then on stays "not ready"
// until its stream or the event is synchronized, or tfd_complete_all.
#include "entries.h"
#include "state.h"

namespace tfd {

// Look up an event that must belong to the current context `cur`.
static CUresult find_event(CUevent event, const Context &cur, Event **out)
{
    auto &m = state().events;
    auto it = m.find(handle_of(event));
    if (event == nullptr || it == m.end())
        return CUDA_ERROR_INVALID_HANDLE;
    if (it->second.ctx != cur.handle)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = &it->second;
    return CUDA_SUCCESS;
}

// An event of the calling thread's current context (the prelude of every
// event call): the current context in *cur, the event in *out.
static CUresult current_event(CUevent event, Context **cur, Event **out)
{
    CUresult rc = need_context(cur);
    return rc != CUDA_SUCCESS ? rc : find_event(event, **cur, out);
}

static CUresult stream_create(CUstream *ph, unsigned int flags)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ph == nullptr || (flags & ~unsigned(CU_STREAM_NON_BLOCKING)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    State &s = state();
    uint64_t h = make_handle(Tag::stream);
    s.streams[h] = Stream{cur->handle, flags};
    ++s.live[TFD_STREAMS];
    *ph = handle_ptr<CUstream>(h);
    return CUDA_SUCCESS;
}

static CUresult stream_destroy(CUstream stream)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    State &s = state();
    auto it = s.streams.find(handle_of(stream));
    if (it == s.streams.end())
        return CUDA_ERROR_INVALID_HANDLE;   // also the default streams
    if (it->second.ctx != cur->handle)
        return CUDA_ERROR_INVALID_CONTEXT;
    s.streams.erase(it);
    --s.live[TFD_STREAMS];
    return CUDA_SUCCESS;
}

// Synchronizing the legacy default stream also waits for the blocking
// streams of its context (their work is ordered before it).
static CUresult stream_synchronize(CUstream stream)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t key = 0;
    rc = use_stream(stream, *cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    complete_stream_events(key);
    if (key != legacy_key(cur->handle))
        return CUDA_SUCCESS;
    for (const auto &st : state().streams)
        if (st.second.ctx == cur->handle && (st.second.flags & CU_STREAM_NON_BLOCKING) == 0)
            complete_stream_events(st.first);
    return CUDA_SUCCESS;
}

// The event may come from another context (the real driver allows
// cross-context waits), but a poisoned context poisons its events too.
static CUresult stream_wait_event(CUstream stream, CUevent event, unsigned int flags)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = use_stream(stream, *cur, nullptr);
    if (rc != CUDA_SUCCESS)
        return rc;
    auto &m = state().events;
    auto it = m.find(handle_of(event));
    if (event == nullptr || it == m.end())
        return CUDA_ERROR_INVALID_HANDLE;
    const Context *owner = find_context(it->second.ctx);
    if (owner != nullptr && owner->poison != 0)
        return static_cast<CUresult>(owner->poison);
    if (flags > CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult event_create(CUevent *ph, unsigned int flags)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (ph == nullptr || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) != 0 && (flags & CU_EVENT_DISABLE_TIMING) == 0)
        return CUDA_ERROR_INVALID_VALUE;
    State &s = state();
    uint64_t h = make_handle(Tag::event);
    Event e;
    e.ctx = cur->handle;
    e.flags = flags;
    s.events[h] = e;
    ++s.live[TFD_EVENTS];
    *ph = handle_ptr<CUevent>(h);
    return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent event)
{
    Context *cur = nullptr;
    Event *e = nullptr;
    CUresult rc = current_event(event, &cur, &e);
    if (rc != CUDA_SUCCESS)
        return rc;
    State &s = state();
    s.events.erase(handle_of(event));
    --s.live[TFD_EVENTS];
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent event, CUstream stream)
{
    Context *cur = nullptr;
    Event *e = nullptr;
    CUresult rc = current_event(event, &cur, &e);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t key = 0;
    rc = use_stream(stream, *cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    e->stream_key = key;
    e->pending = state().async_pending;
    return CUDA_SUCCESS;
}

static CUresult event_query(CUevent event)
{
    Context *cur = nullptr;
    Event *e = nullptr;
    CUresult rc = current_event(event, &cur, &e);
    if (rc != CUDA_SUCCESS)
        return rc;
    return e->pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

static CUresult event_synchronize(CUevent event)
{
    Context *cur = nullptr;
    Event *e = nullptr;
    CUresult rc = current_event(event, &cur, &e);
    if (rc != CUDA_SUCCESS)
        return rc;
    e->pending = false;
    return CUDA_SUCCESS;
}

CUresult entry::d_cuStreamCreate(CUstream *ph, unsigned int flags)
{
    return run("cuStreamCreate", [&] { return stream_create(ph, flags); });
}

CUresult entry::d_cuStreamDestroy(CUstream stream)
{
    return run("cuStreamDestroy", [&] { return stream_destroy(stream); });
}

CUresult entry::d_cuStreamSynchronize(CUstream stream)
{
    return run("cuStreamSynchronize", [&] { return stream_synchronize(stream); });
}

CUresult entry::d_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
    return run("cuStreamWaitEvent", [&] { return stream_wait_event(stream, event, flags); });
}

CUresult entry::d_cuEventCreate(CUevent *ph, unsigned int flags)
{
    return run("cuEventCreate", [&] { return event_create(ph, flags); });
}

CUresult entry::d_cuEventDestroy(CUevent event)
{
    return run("cuEventDestroy", [&] { return event_destroy(event); });
}

CUresult entry::d_cuEventRecord(CUevent event, CUstream stream)
{
    return run("cuEventRecord", [&] { return event_record(event, stream); });
}

CUresult entry::d_cuEventQuery(CUevent event)
{
    return run("cuEventQuery", [&] { return event_query(event); });
}

CUresult entry::d_cuEventSynchronize(CUevent event)
{
    return run("cuEventSynchronize", [&] { return event_synchronize(event); });
}

}  // namespace tfd
