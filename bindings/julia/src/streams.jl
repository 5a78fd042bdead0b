# SPDX-License-Identifier: MIT OR Apache-2.0
# Streams: handles bound to one stream slot, and each task's own stream.
#
# The C library picks an unbound handle's slot from the calling OS thread.
# A Julia task may resume on another thread after any yield point, so the
# binding never lets it: every call that works on a slot goes through a
# Stream, a bound handle (tf_runtime_bind_slot) whose slot does not depend
# on the thread.  A call given a Runtime uses the calling task's stream of
# that runtime, kept in task-local storage as CUDA.jl keeps each task's
# CuStream: made at the task's first such call, on the next slot in turn.

"""
    Stream(rt::Runtime, slot)
    Stream(rt::Runtime)
    Stream(f, rt, slot); Stream(f, rt)

A handle of the runtime whose calls always use stream slot `slot` (0-based;
without `slot`, the next slot in turn), from whatever thread the task runs
on (`tf_runtime_bind_slot`).  Every transfer, enqueue, event and sync takes
one; they are ordered on the slot's stream.  A `Stream` may be shared by
tasks (they share its stream) and keeps the runtime alive until closed.
The do-block forms close it when `f(stream)` returns.  See also
[`task_stream`](@ref).
"""
mutable struct Stream <: RuntimeHandle
    ptr::Ptr{L.tf_runtime} # a bound handle; never reassigned
    @atomic state::Int
    slot::Int              # never reassigned
    # An event of this stream for waiting by polling (wait.jl), made at the
    # first such wait and released with the stream.
    @atomic poll_event::Ptr{L.tf_event}

    Stream(ptr::Ptr{L.tf_runtime}, slot::Integer) =
        _finalized(new(ptr, 0, Int(slot), Ptr{L.tf_event}(C_NULL)))
end

_kind(::Stream) = "Stream"
_release_op(::Stream) = "tf_runtime_release"

function _release_c(s::Stream)
    ev = @atomicswap s.poll_event = Ptr{L.tf_event}(C_NULL)
    ev == C_NULL || L.tf_event_release(ev)
    return L.tf_runtime_release(s.ptr)
end

function Stream(x::RuntimeHandle, slot::Integer)
    s = int32_arg("tf_runtime_bind_slot", "slot", slot)
    _with_ptr(p -> _bind(p, s), x, "tf_runtime_bind_slot")
end

Stream(rt::Runtime) = Stream(rt, _next_slot(rt, "tf_runtime_bind_slot"))
Stream(f::Function, x::RuntimeHandle, slot::Integer) = _closing(f, Stream(x, slot))
Stream(f::Function, rt::Runtime) = _closing(f, Stream(rt))

function _bind(p::Ptr{L.tf_runtime}, slot::Int32)
    out = Ref{Ptr{L.tf_runtime}}(C_NULL)
    check(L.tf_runtime_bind_slot(p, slot, out))
    return Stream(out[], slot)
end

"A new reference to the same stream slot (`tf_runtime_retain`), closed independently."
function retain(s::Stream)
    _with_ptr(s, "tf_runtime_retain") do p
        check(L.tf_runtime_retain(p))
        return Stream(p, s.slot)
    end
end

# Runs f(s, p): s the Stream the call uses (x itself, or the calling task's
# stream of the Runtime x) and p its C pointer, both held for the call.
_with_stream(f, s::Stream, op) = _with_ptr(p -> f(s, p), s, op)

function _with_stream(f, rt::Runtime, op)
    _with_ptr(rt, op) do _
        s = _task_stream(rt, op)
        _with_ptr(p -> f(s, p), s, op)
    end
end

# ---- each task's stream of each runtime ---------------------------------------

# Per runtime (by tf_runtime_identity): how many Runtime objects of it are
# open, the slot the next stream takes, and the task streams made for it
# (weakly: a task that ends drops its stream, whose finalizer releases it).
mutable struct _TaskStreams
    runtimes::Int
    next_slot::Int
    streams::Vector{WeakRef}
end

# A spin lock: Runtime finalizers take it, and must not yield.  Guards the
# table and every entry.
const _TASK_STREAMS_LOCK = Threads.SpinLock()
const _TASK_STREAMS = Dict{UInt64,_TaskStreams}()

# The key of a task's Dict{UInt64,Stream} (runtime identity => stream).
const _TLS_STREAMS = :TenferroGPU_streams

function _runtime_opened(rt::Runtime)
    lock(_TASK_STREAMS_LOCK)
    try
        entry = get!(() -> _TaskStreams(0, 0, WeakRef[]), _TASK_STREAMS, rt.identity)
        entry.runtimes += 1
    finally
        unlock(_TASK_STREAMS_LOCK)
    end
    return nothing
end

# The last Runtime of a runtime closes its task streams: the runtime is torn
# down once the streams the user made are closed too, not at some later
# garbage collection.  A call in flight on such a stream finishes first.
function _runtime_closed(rt::Runtime)
    lock(_TASK_STREAMS_LOCK)
    orphans = try
        entry = get(_TASK_STREAMS, rt.identity, nothing)
        if entry === nothing || (entry.runtimes -= 1) > 0
            WeakRef[]
        else
            delete!(_TASK_STREAMS, rt.identity)
            entry.streams
        end
    finally
        unlock(_TASK_STREAMS_LOCK)
    end
    for w in orphans
        s = w.value
        s isa Stream && _close_quietly(s)
    end
    return nothing
end

function _close_quietly(s::Stream)
    try
        close(s)
    catch
        # Closed meanwhile (by its task's finalizer or the user): released once.
    end
    return nothing
end

# The next slot in turn for a new stream of rt.
function _next_slot(rt::Runtime, op)
    n = slot_count(rt)
    lock(_TASK_STREAMS_LOCK)
    k = try
        entry = get(_TASK_STREAMS, rt.identity, nothing)
        entry === nothing ? 0 : (entry.next_slot += 1)
    finally
        unlock(_TASK_STREAMS_LOCK)
    end
    k == 0 && throw(binding_error(L.TF_ERROR_INVALID_HANDLE, op, "the Runtime was closed"))
    return (k - 1) % n
end

"""
    task_stream(rt::Runtime) -> Stream
    task_stream(s::Stream) -> s

The calling task's own stream of `rt`: what every call given `rt` uses.
Made at the task's first such call, bound to the next slot in turn, and
kept in the task's task-local storage, so all of the task's work on `rt`
(and on every `retain` of it) is ordered on one stream, whatever thread the
task runs on.  It is released when the last open `Runtime` of the runtime
is closed (or finalized), when the task has ended and the garbage collector
finalizes the stream, or by `close(task_stream(rt))` (the task's next call
then makes a new one, possibly on another slot).  Tasks do not inherit
their parent's stream; pass a [`Stream`](@ref) to share one.
"""
task_stream(rt::Runtime) = _with_ptr(_ -> _task_stream(rt, "tf_runtime_bind_slot"), rt, "tf_runtime_bind_slot")
task_stream(s::Stream) = s

# The calling task's stream of rt, which the caller holds open.
function _task_stream(rt::Runtime, op)
    tls = task_local_storage()
    streams = get!(() -> Dict{UInt64,Stream}(), tls, _TLS_STREAMS)::Dict{UInt64,Stream}
    s = get(streams, rt.identity, nothing)
    s !== nothing && isopen(s) && return s
    s = _new_task_stream(rt, op)
    filter!(kv -> isopen(kv.second), streams) # those of runtimes closed since
    streams[rt.identity] = s
    return s
end

function _new_task_stream(rt::Runtime, op)
    s = _bind(rt.ptr, Int32(_next_slot(rt, op)))
    lock(_TASK_STREAMS_LOCK)
    registered = try
        entry = get(_TASK_STREAMS, rt.identity, nothing)
        entry === nothing || push!(filter!(w -> w.value !== nothing, entry.streams), WeakRef(s))
        entry !== nothing
    finally
        unlock(_TASK_STREAMS_LOCK)
    end
    if !registered # the last Runtime was closed meanwhile
        close(s)
        throw(binding_error(L.TF_ERROR_INVALID_HANDLE, op, "the Runtime was closed"))
    end
    return s
end
