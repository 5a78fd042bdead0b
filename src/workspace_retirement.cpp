#include "workspace_retirement.h"

#include <new>

#include "callback.h"
#include "context_guard.h"
#include "cuda_status.h"
#include "error.h"
#include "log.h"

namespace tf {
namespace {

CUresult query(const DriverApi &api, CUevent e) {
    return api.cuEventQuery ? api.cuEventQuery(e) : CUDA_ERROR_NOT_FOUND;
}

void destroy_event(const DriverApi &api, CUevent e) {
    if (api.cuEventDestroy) api.cuEventDestroy(e);
}

}  // namespace

void run_release(const DriverApi &api, const char *op, const Retirement &r) {
    KeepLastError keep_error;  // a release has no caller to report to: log instead
    // The primary context is current; a release that moves the thread is
    // undone before the library goes on (more releases, stream waits).
    ContextScope keep_context;
    keep_context.hold(api, op);
    if (catch_callback(op, [&] { r.release(r.resource, r.user_data); }) != TF_OK)
        log(TF_LOG_ERROR, "%s (the release of retired resource %p)", current_error().message,
            r.resource);
}

// A pooled event, or a new one; NULL if none can be made.
CUevent RetirementQueue::take_event_locked(const DriverApi &api) {
    if (!pool_.empty()) {
        CUevent e = pool_.back();
        pool_.pop_back();
        return e;
    }
    CUevent e = nullptr;
    if (!api.cuEventCreate || api.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return nullptr;
    return e;
}

void RetirementQueue::collect_locked(const DriverApi &api, Found *found) {
    // Reserved up front so that moving entries out cannot throw half-way.
    found->done.reserve(stats_.in_flight);
    found->failed.reserve(stats_.in_flight);
    for (std::deque<Entry> &q : slots_) {
        while (!q.empty()) {
            CUresult r = query(api, q.front().event);
            if (r == CUDA_ERROR_NOT_READY) break;  // later events of this stream neither
            Entry e = q.front();
            q.pop_front();
            --stats_.in_flight;
            if (r != CUDA_SUCCESS) {
                ++stats_.barrier_fallbacks;
                found->failed.push_back(e);
                break;
            }
            ++stats_.released;
            found->done.push_back(e);
            try {
                pool_.push_back(e.event);
            } catch (const std::bad_alloc &) {
                destroy_event(api, e.event);
            }
        }
    }
}

// Waits for `stream`, then releases `r`; if the wait fails, `r` leaks.
static CUresult wait_then_release(const DriverApi &api, const char *op, CUstream stream,
                                  const Retirement &r, std::mutex &mutex,
                                  tf_retirement_stats &stats) {
    CUresult w = api.cuStreamSynchronize ? api.cuStreamSynchronize(stream) : CUDA_ERROR_NOT_FOUND;
    {
        std::lock_guard<std::mutex> hold(mutex);
        ++(w == CUDA_SUCCESS ? stats.released : stats.leaked);
    }
    if (w == CUDA_SUCCESS) run_release(api, op, r);
    return w;
}

CUresult RetirementQueue::finish(const DriverApi &api, const char *op, Found *found) {
    for (const Entry &e : found->done) run_release(api, op, e.r);
    CUresult first = CUDA_SUCCESS;
    for (const Entry &e : found->failed) {
        destroy_event(api, e.event);  // its state is unknown: never reused
        CUresult w = wait_then_release(api, op, e.stream, e.r, mutex_, stats_);
        if (w == CUDA_SUCCESS) continue;
        if (first == CUDA_SUCCESS) first = w;
        char what[96];
        log(TF_LOG_WARNING,
            "%s: leaking retired resource %p: neither its event (cuEventQuery) nor its stream "
            "(cuStreamSynchronize: %s) proved the device done with it",
            op, e.r.resource, describe_cuda(api, w, what, sizeof what));
    }
    return first;
}

tf_status RetirementQueue::retire(const DriverApi &api, const char *op, int slot_count,
                                  uint32_t capacity, int slot, CUstream stream,
                                  const Retirement &r) {
    Found found;
    bool queued = false;
    {
        std::lock_guard<std::mutex> hold(mutex_);
        if (slots_.empty()) slots_.resize(static_cast<size_t>(slot_count));
        collect_locked(api, &found);
        CUevent e = stats_.in_flight < capacity ? take_event_locked(api) : nullptr;
        if (e && api.cuEventRecord && api.cuEventRecord(e, stream) == CUDA_SUCCESS) {
            try {
                slots_[slot].push_back(Entry{r, e, stream});
                queued = true;
            } catch (const std::bad_alloc &) {
                destroy_event(api, e);  // recorded, maybe pending: not reusable
            }
        } else if (e) {
            destroy_event(api, e);  // a failed record leaves its state unknown
        }
        if (queued) {
            ++stats_.deferred;
            if (++stats_.in_flight > stats_.max_in_flight) stats_.max_in_flight = stats_.in_flight;
        } else {
            ++stats_.barrier_fallbacks;
        }
    }
    finish(api, op, &found);  // older releases first: retirement order
    if (queued) return TF_OK;
    return barrier_fallback(api, op, stream, r);
}

// Waits for the caller's stream instead of queueing `r`.  The wait also
// passed this slot's older retirements; they are released first, so the
// slot's releases stay in retirement order.
tf_status RetirementQueue::barrier_fallback(const DriverApi &api, const char *op, CUstream stream,
                                            const Retirement &r) {
    CUresult w = api.cuStreamSynchronize ? api.cuStreamSynchronize(stream) : CUDA_ERROR_NOT_FOUND;
    if (w != CUDA_SUCCESS) {
        {
            std::lock_guard<std::mutex> hold(mutex_);
            ++stats_.leaked;
        }
        return fail_cuda(api, op, "cuStreamSynchronize", w);
    }
    poll(api, op);
    {
        std::lock_guard<std::mutex> hold(mutex_);
        ++stats_.released;
    }
    run_release(api, op, r);
    return TF_OK;
}

CUresult RetirementQueue::poll(const DriverApi &api, const char *op) {
    Found found;
    {
        std::lock_guard<std::mutex> hold(mutex_);
        collect_locked(api, &found);
    }
    return finish(api, op, &found);
}

void RetirementQueue::release_all(const DriverApi &api) {
    std::vector<Entry> pending;
    std::vector<CUevent> events;
    {
        std::lock_guard<std::mutex> hold(mutex_);
        for (std::deque<Entry> &q : slots_) {
            pending.insert(pending.end(), q.begin(), q.end());
            q.clear();
        }
        events.swap(pool_);
        stats_.released += pending.size();
        stats_.in_flight = 0;
    }
    // Every stream was synchronized: each recorded point has been passed.
    for (const Entry &e : pending) {
        run_release(api, "tf_runtime_release", e.r);
        events.push_back(e.event);
    }
    for (CUevent e : events) {
        CUresult r = api.cuEventDestroy ? api.cuEventDestroy(e) : CUDA_ERROR_NOT_FOUND;
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
            char what[96];
            log(TF_LOG_WARNING, "tf_runtime_release: cuEventDestroy of a retirement event failed: %s",
                describe_cuda(api, r, what, sizeof what));
        }
    }
}

tf_retirement_stats RetirementQueue::stats(uint32_t capacity) const {
    std::lock_guard<std::mutex> hold(mutex_);
    tf_retirement_stats s = stats_;
    s.struct_size = sizeof s;
    s.capacity = capacity;
    return s;
}

}  // namespace tf
