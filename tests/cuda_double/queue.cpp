// SPDX-License-Identifier: MIT OR Apache-2.0
// Stream queues of the driver double: ordering, progress, the background
// thread.  See queue.h for the rules.
#include "queue.h"

#include <pthread.h>

#include <thread>
#include <vector>

#include "state.h"

namespace tfd {

static thread_local bool t_in_host_function = false;

bool in_host_function()
{
    return t_in_host_function;
}

namespace {

// Marks the calling thread as running a host function for a scope.
class HostFunctionScope {
public:
    HostFunctionScope()
    {
        t_in_host_function = true;
    }
    ~HostFunctionScope()
    {
        t_in_host_function = false;
    }
    HostFunctionScope(const HostFunctionScope &) = delete;
    HostFunctionScope &operator=(const HostFunctionScope &) = delete;
};

Queue *find_queue(uint64_t key)
{
    auto &m = state().queues;
    auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
}

Op wait_op(uint64_t key, uint64_t seq, uint64_t ctx)
{
    Op w;
    w.what = "(legacy stream order)";
    w.ctx = ctx;
    w.wait_key = key;
    w.wait_seq = seq;
    return w;
}

// The legacy default stream and the blocking streams of a context wait for
// each other: an op on one starts after everything queued before it on the
// other(s).  Non-blocking streams take no part.
void add_legacy_waits(uint64_t key, uint64_t ctx, std::deque<Op> *out)
{
    Queue &q = queue_of(key, ctx);
    if (q.legacy) {
        for (auto &other : state().queues)
            if (other.second.ctx == ctx && other.second.blocking &&
                other.second.executed < other.second.enqueued)
                out->push_back(wait_op(other.first, other.second.enqueued, ctx));
    } else if (q.blocking) {
        Queue *legacy = find_queue(legacy_key(ctx));
        if (legacy != nullptr && legacy->executed < legacy->enqueued)
            out->push_back(wait_op(legacy_key(ctx), legacy->enqueued, ctx));
    }
}

void fault(uint64_t ctx, int code)
{
    Context *c = find_context(ctx);
    if (c != nullptr && c->poison == 0)
        c->poison = code;
}

// Run what an op does, unless its context has a sticky fault.
void execute(Op &op)
{
    if (!op.body)
        return;
    Context *c = find_context(op.ctx);
    if (c == nullptr || c->poison != 0)
        return;  // dropped: a faulted context runs nothing more
    int rc = 0;
    try {
        if (op.host_function) {
            HostFunctionScope scope;
            rc = op.body(*c);
        } else {
            rc = op.body(*c);
        }
    } catch (...) {
        rc = CUDA_ERROR_UNKNOWN;
    }
    if (rc != 0)
        fault(op.ctx, rc);
}

// Marks a queue as running its front op for a scope.
class Running {
public:
    explicit Running(Queue &q) : q_(q)
    {
        q_.running = true;
    }
    ~Running()
    {
        q_.running = false;
    }
    Running(const Running &) = delete;
    Running &operator=(const Running &) = delete;

private:
    Queue &q_;
};

// Run the first op of a queue: a wait first runs what it waits for.  False
// when the queue is empty or already running an op further up this
// thread's stack (a cycle: only a companion's op that makes other streams
// progress, tfd_advance, can get here).  A wait that cannot be met for that
// reason faults its context with CUDA_ERROR_LAUNCH_TIMEOUT: on a device it
// would never end.
bool run_front(uint64_t key)
{
    Queue *q = find_queue(key);
    if (q == nullptr || q->ops.empty() || q->running)
        return false;
    Running running(*q);
    bool met =
        q->ops.front().wait_key == 0 || advance(q->ops.front().wait_key, q->ops.front().wait_seq);
    // Running other streams never adds or removes queues: q is still valid.
    Op op = std::move(q->ops.front());
    q->ops.pop_front();
    if (met)
        execute(op);
    else
        fault(op.ctx, CUDA_ERROR_LAUNCH_TIMEOUT);
    ++q->executed;
    return true;
}

// ---- background mode -----------------------------------------------------------

// The earliest op at the front of a queue, or 0 when every queue is empty.
uint64_t earliest_front(Clock::time_point *due)
{
    uint64_t key = 0;
    for (auto &q : state().queues) {
        if (q.second.ops.empty())
            continue;
        if (key == 0 || q.second.ops.front().due < *due) {
            key = q.first;
            *due = q.second.ops.front().due;
        }
    }
    return key;
}

void background_main()
{
    State &s = state();
    Lock l(s.mu);
    for (;;) {
        Clock::time_point due;
        uint64_t key = s.exec == TFD_EXEC_BACKGROUND ? earliest_front(&due) : 0;
        if (key == 0)
            s.background_cv.wait(l);
        else if (due > Clock::now())
            s.background_cv.wait_until(l, due);
        else
            run_front(key);
    }
}

// A forked child has no background thread; the mutex is taken around fork()
// so that the child never inherits it locked by a thread that is gone.
void before_fork()
{
    state().mu.lock();
}
void after_fork_parent()
{
    state().mu.unlock();
}
void after_fork_child()
{
    state().background_started = false;
    state().mu.unlock();
}

void start_background()
{
    State &s = state();
    if (s.background_started)
        return;
    static bool fork_handlers = false;
    if (!fork_handlers) {
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        fork_handlers = true;
    }
    std::thread(background_main).detach();  // lives as long as the process
    s.background_started = true;
}

}  // namespace

Queue &queue_of(uint64_t key, uint64_t ctx, bool blocking)
{
    auto &m = state().queues;
    auto it = m.find(key);
    if (it != m.end())
        return it->second;
    Queue &q = m[key];
    q.ctx = ctx;
    q.legacy = key == legacy_key(ctx);
    q.blocking = blocking;
    return q;
}

uint64_t enqueue(uint64_t key, uint64_t ctx, Op op)
{
    State &s = state();
    op.ctx = ctx;
    if (capture_op(key, op))
        return 0;  // a node of the stream's capture (graph.h), not queued
    std::deque<Op> ops;
    add_legacy_waits(key, ctx, &ops);
    ops.push_back(std::move(op));
    Queue &q = queue_of(key, ctx);
    Clock::time_point due = Clock::now() + s.background_delay;
    for (Op &o : ops) {
        o.due = due;
        q.ops.push_back(std::move(o));
        ++q.enqueued;
    }
    uint64_t seq = q.enqueued;
    if (s.exec == TFD_EXEC_SYNC) {
        advance(key, seq);
    } else if (s.exec == TFD_EXEC_BACKGROUND) {
        start_background();
        s.background_cv.notify_all();
    }
    return seq;
}

bool reached(uint64_t key, uint64_t seq)
{
    const Queue *q = find_queue(key);
    return q == nullptr || q->executed >= seq;
}

bool advance(uint64_t key, uint64_t seq)
{
    while (!reached(key, seq))
        if (!run_front(key))
            return false;
    return true;
}

void drain_stream(uint64_t key)
{
    const Queue *q = find_queue(key);
    if (q != nullptr)
        advance(key, q->enqueued);
}

uint64_t step(uint64_t key, uint64_t n)
{
    uint64_t ran = 0;
    while (ran < n && run_front(key))
        ++ran;
    return ran;
}

// Drain the queues selected by `pick` (their keys are collected first: a
// drain never adds or removes queues, but keeps the loop simple).
template <class Pick>
static void drain_where(Pick pick)
{
    std::vector<uint64_t> keys;
    for (const auto &q : state().queues)
        if (pick(q.second))
            keys.push_back(q.first);
    for (uint64_t k : keys)
        drain_stream(k);
}

void drain_context(uint64_t ctx)
{
    drain_where([&](const Queue &q) { return q.ctx == ctx; });
}

void drain_device(int device)
{
    drain_where([&](const Queue &q) {
        const Context *c = find_context(q.ctx);
        return c != nullptr && c->device == device;
    });
}

void drain_all()
{
    drain_where([](const Queue &) { return true; });
}

void drop_context_queues(uint64_t ctx)
{
    drain_context(ctx);
    auto &m = state().queues;
    for (auto it = m.begin(); it != m.end();)
        it = it->second.ctx == ctx ? m.erase(it) : std::next(it);
}

void drop_stream_queue(uint64_t key)
{
    drain_stream(key);
    state().queues.erase(key);
}

uint64_t pending(uint64_t key)
{
    const Queue *q = find_queue(key);
    return q == nullptr ? 0 : q->ops.size();
}

uint64_t pending_total()
{
    uint64_t n = 0;
    for (const auto &q : state().queues)
        n += q.second.ops.size();
    return n;
}

void execution_changed()
{
    State &s = state();
    if (s.exec == TFD_EXEC_BACKGROUND)
        start_background();
    s.background_cv.notify_all();
}

}  // namespace tfd
