// SPDX-License-Identifier: MIT OR Apache-2.0
// Streams, events and the calls that wait for them.  Each stream has a queue
// (queue.h); an event record is a marker op in its stream's queue, so an
// event is complete once its stream has run the marker.  A stream wait is an
// op that first runs the event's stream up to the marker it saw when the
// wait was queued (later records do not move it, as in CUDA).
#include "entries.h"
#include "state.h"

#include <vector>

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
    queue_of(h, cur->handle, (flags & CU_STREAM_NON_BLOCKING) == 0);
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
        return CUDA_ERROR_INVALID_HANDLE;  // also the default streams
    if (it->second.ctx != cur->handle)
        return CUDA_ERROR_INVALID_CONTEXT;
    // CUDA finishes the stream's work after the call returns; the double
    // runs it now, so the outcome is the same whatever the test does next.
    drop_capture(it->first);
    drop_stream_queue(it->first);
    s.streams.erase(it);
    --s.live[TFD_STREAMS];
    return CUDA_SUCCESS;
}

// Synchronizing the legacy default stream also waits for the blocking
// streams of its context (their work is ordered before it).  A fault raised
// by the work it ran is reported by the call.
static CUresult stream_synchronize(CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc == CUDA_SUCCESS)
        rc = refuse_in_capture(key);
    if (rc != CUDA_SUCCESS)
        return rc;
    drain_stream(key);
    if (key == legacy_key(cur->handle)) {
        std::vector<uint64_t> blocking;
        for (const auto &st : state().streams)
            if (st.second.ctx == cur->handle && (st.second.flags & CU_STREAM_NON_BLOCKING) == 0)
                blocking.push_back(st.first);
        for (uint64_t k : blocking)
            drain_stream(k);
    }
    pools_after_sync(cur->device);
    return need_context(nullptr);
}

// Not ready while the stream has queued work; with query progress n, the
// stream first runs up to n ops.
static CUresult stream_query(CUstream stream)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc == CUDA_SUCCESS)
        rc = refuse_in_capture(key);
    if (rc != CUDA_SUCCESS)
        return rc;
    step(key, state().query_progress);
    if ((rc = need_context(nullptr)) != CUDA_SUCCESS)
        return rc;
    return pending(key) == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult ctx_synchronize()
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc == CUDA_SUCCESS)
        rc = refuse_context_sync(cur->handle);
    if (rc != CUDA_SUCCESS)
        return rc;
    drain_context(cur->handle);
    pools_after_sync(cur->device);
    return need_context(nullptr);
}

static CUresult launch_host_func(CUstream stream, CUhostFn fn, void *user_data)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (fn == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    Op op;
    op.what = "cuLaunchHostFunc";
    op.host_function = true;
    op.body = [fn, user_data](Context &) {
        fn(user_data);
        return 0;
    };
    enqueue(key, cur->handle, std::move(op));
    return CUDA_SUCCESS;
}

// The event may come from another context (the real driver allows
// cross-context waits), but a poisoned context poisons its events too.
static CUresult stream_wait_event(CUstream stream, CUevent event, unsigned int flags)
{
    Context *cur = nullptr;
    uint64_t key = 0;
    CUresult rc = need_stream(stream, &cur, &key);
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
    const Event &e = it->second;
    bool handled = false;
    rc = capture_stream_wait(key, it->first, e, flags, &handled);
    if (handled)
        return rc;
    if (!e.recorded || reached(e.stream_key, e.seq))
        return CUDA_SUCCESS;  // nothing left to wait for
    Op op;
    op.what = "cuStreamWaitEvent";
    op.wait_key = e.stream_key;
    op.wait_seq = e.seq;
    enqueue(key, cur->handle, std::move(op));
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

// On a capturing stream the capture decides (graph.h).
static CUresult event_record(CUevent event, CUstream stream, unsigned flags)
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
    bool handled = false;
    rc = capture_event_record(key, handle_of(event), *e, flags, &handled);
    if (handled)
        return rc;
    Op marker;
    marker.what = "cuEventRecord";
    uint64_t seq = enqueue(key, cur->handle, std::move(marker));  // runs no event call
    e->recorded = true;
    e->stream_key = key;
    e->seq = seq;
    e->captured = 0;
    return CUDA_SUCCESS;
}

static bool event_done(const Event &e)
{
    return !e.recorded || reached(e.stream_key, e.seq);
}

// With query progress n, the event's stream first runs up to n ops, stopping
// at the record.
static CUresult event_query(CUevent event)
{
    Context *cur = nullptr;
    Event *e = nullptr;
    CUresult rc = current_event(event, &cur, &e);
    if (rc == CUDA_SUCCESS)
        rc = refuse_captured_event(*e);
    if (rc != CUDA_SUCCESS)
        return rc;
    for (unsigned long i = 0; i < state().query_progress && !event_done(*e); ++i)
        step(e->stream_key, 1);
    if ((rc = need_context(nullptr)) != CUDA_SUCCESS)
        return rc;
    return event_done(*e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult event_synchronize(CUevent event)
{
    Context *cur = nullptr;
    Event *e = nullptr;
    CUresult rc = current_event(event, &cur, &e);
    if (rc == CUDA_SUCCESS)
        rc = refuse_captured_event(*e);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (e->recorded)
        advance(e->stream_key, e->seq);
    pools_after_sync(cur->device);
    return need_context(nullptr);
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

CUresult entry::d_cuStreamQuery(CUstream stream)
{
    return run("cuStreamQuery", [&] { return stream_query(stream); });
}

CUresult entry::d_cuCtxSynchronize()
{
    return run("cuCtxSynchronize", [&] { return ctx_synchronize(); });
}

CUresult entry::d_cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *user_data)
{
    return run("cuLaunchHostFunc", [&] { return launch_host_func(stream, fn, user_data); });
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
    return run("cuEventRecord", [&] { return event_record(event, stream, 0); });
}

CUresult entry::d_cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned int flags)
{
    return run("cuEventRecordWithFlags", [&] { return event_record(event, stream, flags); });
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
