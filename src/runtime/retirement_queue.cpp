// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/retirement_queue.h"

#include <cstdio>
#include <new>

#include "driver/context_scope.h"
#include "driver/cuda_status.h"
#include "util/callback.h"
#include "util/defer_cancellation.h"
#include "util/error.h"
#include "util/log.h"

namespace tf {
namespace {

CUresult query(const DriverApi &api, CUevent e) {
    return api.cuEventQuery ? api.cuEventQuery(e) : CUDA_ERROR_NOT_FOUND;
}

CUresult wait_for(const DriverApi &api, CUstream stream) {
    return api.cuStreamSynchronize ? api.cuStreamSynchronize(stream) : CUDA_ERROR_NOT_FOUND;
}

void destroy_event(const DriverApi &api, CUevent e) {
    if (e && api.cuEventDestroy) api.cuEventDestroy(e);
}

// TF_ERROR_CUDA (or the status of the wait's result) naming the failed wait
// and what leaked; TF_OK when nothing did.
tf_status report(const DriverApi &api, const RetirementLeaks &leaks) {
    if (leaks.count == 0) return TF_OK;
    char consequence[160];
    std::snprintf(consequence, sizeof consequence,
                  "%llu retired resource%s leaked (the first: %p): neither its event nor its "
                  "stream proved the device done with it",
                  static_cast<unsigned long long>(leaks.count), leaks.count == 1 ? "" : "s",
                  leaks.first);
    return fail_cuda(api, "cuStreamSynchronize", leaks.first_result, consequence);
}

}  // namespace

void run_release(const DriverApi &api, const Retirement &r) {
    KeepLastError keep_error;  // a release has no caller to report to: log instead
    // The primary context is current; a release that moves the thread is
    // undone before the library goes on (more releases, stream waits).
    ContextScope keep_context;
    keep_context.hold(api);
    if (catch_callback([&] { r.release(r.resource, r.user_data); }) != TF_OK)
        log(TF_LOG_ERROR, "%s (the release of retired resource %p)", current_error().message,
            r.resource);
}

// Progress through a Found.  When the thread unwinds before the end (a
// release was cancelled, or called pthread_exit), the destructor counts what
// was left as leaked: releases counted but never started, and failed entries
// whose wait never returned (their events are destroyed).
class RetirementQueue::Resolution {
public:
    Resolution(RetirementQueue &queue, const DriverApi &api, Found &found)
        : queue_(queue), api_(api), found_(found) {}
    Resolution(const Resolution &) = delete;
    Resolution &operator=(const Resolution &) = delete;
    ~Resolution() {
        const size_t never_started = found_.done.size() - done + found_.last.size() - last;
        const size_t unresolved = found_.failed.size() - failed;
        if (never_started + unresolved != 0) count_dropped(never_started, unresolved);
    }

    size_t done = 0, failed = 0, last = 0;  // entries begun (released or resolved)

private:
    void count_dropped(size_t never_started, size_t unresolved) {
        DeferCancellation no_cancel;  // unwinding: none may act again in here
        for (size_t i = failed; i < found_.failed.size(); ++i)
            destroy_event(api_, found_.failed[i].event);
        {
            std::lock_guard<std::mutex> hold(queue_.mutex_);
            queue_.stats_.released -= never_started;
            queue_.stats_.in_flight -= unresolved;
            queue_.stats_.leaked += never_started + unresolved;
        }
        log(TF_LOG_WARNING,
            "%s: leaking %zu retired resource%s whose release never ran: the thread unwound "
            "(cancelled, or a release exited the thread) before running it",
            current_operation(), never_started + unresolved,
            never_started + unresolved == 1 ? "" : "s");
    }

    RetirementQueue &queue_;
    const DriverApi &api_;
    Found &found_;
};

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
    // Reserved up front (with room for a barrier fallback's own) so that
    // moving entries out cannot throw half-way.
    found->done.reserve(stats_.in_flight + 1);
    found->failed.reserve(stats_.in_flight);
    found->last.reserve(1);
    for (std::deque<Entry> &q : slots_) {
        while (!q.empty()) {
            CUresult r = query(api, q.front().event);
            if (r == CUDA_ERROR_NOT_READY) break;  // later events of this stream neither
            Entry e = q.front();
            q.pop_front();
            if (r != CUDA_SUCCESS) {
                found->failed.push_back(e);  // in flight until its stream wait returns
                break;
            }
            --stats_.in_flight;
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

RetirementLeaks RetirementQueue::finish(const DriverApi &api, Found *found) {
    Resolution progress(*this, api, *found);
    while (progress.done < found->done.size()) run_release(api, found->done[progress.done++].r);
    RetirementLeaks leaks;
    while (progress.failed < found->failed.size()) {
        Entry &e = found->failed[progress.failed];
        destroy_event(api, e.event);  // its state is unknown: never reused
        e.event = nullptr;
        CUresult w = wait_for(api, e.stream);
        {
            std::lock_guard<std::mutex> hold(mutex_);
            --stats_.in_flight;
            ++(w == CUDA_SUCCESS ? stats_.released : stats_.leaked);
        }
        ++progress.failed;
        if (w == CUDA_SUCCESS) {
            run_release(api, e.r);
            continue;
        }
        leaks.add(e.r.resource, w);
        char what[96];
        log(TF_LOG_WARNING,
            "%s: leaking retired resource %p: neither its event (cuEventQuery) nor its stream "
            "(cuStreamSynchronize: %s) proved the device done with it",
            current_operation(), e.r.resource, describe_cuda(api, w, what, sizeof what));
    }
    while (progress.last < found->last.size()) run_release(api, found->last[progress.last++].r);
    return leaks;
}

tf_status RetirementQueue::retire(const DriverApi &api, int slot_count, uint32_t capacity, int slot,
                                  CUstream stream, const Retirement &r) {
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
        }
    }
    RetirementLeaks earlier = finish(api, &found);  // older releases first
    tf_status st = queued ? TF_OK : barrier_fallback(api, stream, r, &earlier);
    if (earlier.count != 0) {
        // Not this call's status, which is about the caller's own resource:
        // the next poll or sync reports them.
        std::lock_guard<std::mutex> hold(mutex_);
        unreported_.add(earlier);
    }
    return st;
}

// Waits for the caller's stream instead of queueing `r`.  The wait also
// passed this slot's older retirements; they are released first, so the
// slot's releases stay in retirement order.
tf_status RetirementQueue::barrier_fallback(const DriverApi &api, CUstream stream,
                                            const Retirement &r, RetirementLeaks *earlier) {
    CUresult w = wait_for(api, stream);
    if (w != CUDA_SUCCESS) {
        {
            std::lock_guard<std::mutex> hold(mutex_);
            ++stats_.barrier_fallbacks;
            ++stats_.leaked;
        }
        return fail_cuda(api, "cuStreamSynchronize", w);
    }
    Found found;
    {
        std::lock_guard<std::mutex> hold(mutex_);
        collect_locked(api, &found);
        ++stats_.barrier_fallbacks;
        ++stats_.released;
        found.last.push_back(Entry{r, nullptr, stream});
    }
    earlier->add(finish(api, &found));
    return TF_OK;
}

RetirementLeaks RetirementQueue::take_unreported() {
    std::lock_guard<std::mutex> hold(mutex_);
    RetirementLeaks taken = unreported_;
    unreported_ = RetirementLeaks{};
    return taken;
}

tf_status RetirementQueue::poll(const DriverApi &api) {
    Found found;
    {
        std::lock_guard<std::mutex> hold(mutex_);
        collect_locked(api, &found);
    }
    RetirementLeaks found_now = finish(api, &found);
    RetirementLeaks leaks = take_unreported();  // the older ones first
    leaks.add(found_now);
    return report(api, leaks);
}

tf_status RetirementQueue::report_unreported(const DriverApi &api) {
    return report(api, take_unreported());
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
        run_release(api, e.r);  // under teardown's operation name
        events.push_back(e.event);
    }
    for (CUevent e : events) {
        CUresult r = api.cuEventDestroy ? api.cuEventDestroy(e) : CUDA_ERROR_NOT_FOUND;
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
            char what[96];
            log(TF_LOG_WARNING,
                "tf_runtime_release: cuEventDestroy of a retirement event failed: %s",
                describe_cuda(api, r, what, sizeof what));
        }
    }
}

bool RetirementQueue::stats(uint32_t capacity, bool forked_child, tf_retirement_stats *out) const {
    std::unique_lock<std::mutex> hold(mutex_, std::defer_lock);
    if (!forked_child)
        hold.lock();
    else if (!hold.try_lock())
        return false;
    *out = stats_;
    out->struct_size = sizeof *out;
    out->capacity = capacity;
    return true;
}

}  // namespace tf
