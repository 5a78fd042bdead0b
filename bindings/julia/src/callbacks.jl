# SPDX-License-Identifier: MIT OR Apache-2.0
# Julia functions called by the library: the bodies of with_context,
# stream_enqueue and cublas_enqueue, retirement releases, the log callback.
# An exception must never unwind through the library's C frames, so the
# trampolines catch it and the caller rethrows it after the library has
# restored the context and released the slot.

mutable struct Callback
    f::Any
    mode::Int32      # cuBLAS pointer mode (cublas_enqueue)
    result::Any
    stack::Any       # what f threw: current_exceptions() where it was caught, or nothing
end

Callback(f, mode=L.TF_CUBLAS_POINTER_MODE_HOST) = Callback(f, Int32(mode), nothing, nothing)

# What a trampoline returns when f threw: the binding rethrows it.
const _THREW = Int32(-1)

function _run(call::Callback, args...)::Int32
    try
        call.result = call.f(args...)
        return Int32(0)
    catch
        call.stack = current_exceptions() # the exception with its own backtrace
        return _THREW
    end
end

function _context_trampoline(data::Ptr{Cvoid})::Int32
    return _run(unsafe_pointer_to_objref(data)::Callback)
end

function _stream_trampoline(stream::Ptr{Cvoid}, data::Ptr{Cvoid})::Int32
    return _run(unsafe_pointer_to_objref(data)::Callback, stream)
end

function _cublas_trampoline(handle::Ptr{Cvoid}, stream::Ptr{Cvoid}, data::Ptr{Cvoid})::Int32
    call = unsafe_pointer_to_objref(data)::Callback
    c = CublasCall(handle, stream, call.mode)
    try
        call.result = call.f(c)
        return Int32(0)
    catch e
        # A failed cuBLAS call is reported by the library, with its status.
        e isa CublasError && e.status != 0 && return e.status
        call.stack = current_exceptions()
        return _THREW
    finally
        c.valid = false
    end
end

# Whether the calling thread is inside a function the library called (a
# body, a release, the log callback): such code must not yield, so wait.jl
# does not poll there.  Per thread: the C call and the code it calls back
# run on one thread (_invoke pins the task), and a counter per thread id,
# made in __init__, costs no allocation between a failing ccall and the
# copy of its error.  A thread Julia adopted later only enters Julia
# through a callback.
const _CALLBACK_DEPTH = Int[]

function _init_callback_depth()
    empty!(_CALLBACK_DEPTH)
    append!(_CALLBACK_DEPTH, zeros(Int, Threads.maxthreadid()))
end

function _in_callback()
    tid = Threads.threadid()
    return tid > length(_CALLBACK_DEPTH) || @inbounds(_CALLBACK_DEPTH[tid]) > 0
end

function _as_callback(f)
    tid = Threads.threadid()
    tid <= length(_CALLBACK_DEPTH) || return f()
    @inbounds _CALLBACK_DEPTH[tid] += 1
    try
        return f()
    finally
        @inbounds _CALLBACK_DEPTH[tid] -= 1
    end
end

# Runs one library call that calls `call` back: cfn(ptr, data) makes the C
# call with the handle's pointer (the stream's when `on_stream`) and the
# callback's.  The task is pinned to its thread while the body runs, since
# the library's state (the current context, the slot lock) belongs to the
# thread.
function _invoke(cfn, x::RuntimeHandle, op, call::Callback; on_stream::Bool=true)
    t = current_task()
    sticky = t.sticky
    t.sticky = true
    try
        c_call = p -> begin
            status = GC.@preserve call _as_callback(() -> cfn(p, pointer_from_objref(call)))
            call.stack === nothing && check(status)
        end
        on_stream ? _with_stream((_, p) -> c_call(p), x, op) : _with_ptr(c_call, x, op)
    finally
        t.sticky = sticky
    end
    call.stack === nothing || _rethrow_body(call.stack)
    return call.result
end

# Throws what a body threw once the library has returned.  The exception
# object is the body's own (`catch e; e isa T` and `@test_throws` see it
# unchanged); where it was thrown stays on the exception stack as its
# cause, a CapturedException holding the body's backtrace, which
# `current_exceptions()` returns and an uncaught error prints.
@noinline function _rethrow_body(stack)
    thrown = stack[end]
    try
        throw(CapturedException(thrown.exception, thrown.backtrace))
    catch
        throw(thrown.exception)
    end
end

"""
    with_context(f, x::Runtime or Stream)
    with_context(x) do ... end

Call `f()` with the runtime's primary context current on the calling thread
and restore the thread's previous context afterwards (`tf_with_context`);
return what `f` returns.  An exception thrown by `f` is rethrown once the
context is restored, as the same object, with the backtrace of where `f`
threw it kept on the exception stack.  `f` must not yield (I/O, `wait`,
`@sync`, locks that block): other tasks would run on this thread with the
context current.
"""
function with_context(f, x::RuntimeHandle)
    trampoline = @cfunction(_context_trampoline, Int32, (Ptr{Cvoid},))
    _invoke(x, "tf_with_context", Callback(f); on_stream=false) do p, data
        L.tf_with_context(p, trampoline, data)
    end
end

"""
    stream_enqueue(f, x::Stream or Runtime)
    stream_enqueue(x) do stream ... end

Call `f(stream)` with the stream's `CUstream` (for a `Runtime`, the calling
task's stream's) and the primary context current, holding the slot's lock,
so that work of any other library is queued in order with this runtime's
work on the slot (`tf_stream_enqueue`); return what `f` returns.  A call
from `f` that needs the same slot's lock (`stream_enqueue`,
`cublas_enqueue`, `download_scalar`) throws `TF_ERROR_RUNTIME_STATE`
instead of deadlocking.  Exceptions as in [`with_context`](@ref); `f` must
not yield.
"""
function stream_enqueue(f, x::RuntimeHandle)
    trampoline = @cfunction(_stream_trampoline, Int32, (Ptr{Cvoid}, Ptr{Cvoid}))
    _invoke(x, "tf_stream_enqueue", Callback(f)) do p, data
        L.tf_stream_enqueue(p, trampoline, data)
    end
end

# ---- retirement ---------------------------------------------------------------

# The closures the library may still call, keyed by the box passed as
# user_data.  A spin lock: releases may run in finalizers (a runtime's
# teardown), which must not yield.
const _RETIRE_LOCK = Threads.SpinLock()
const _RETIRE_ROOTS = IdDict{Any,Nothing}()

function _release_trampoline(resource::Ptr{Cvoid}, data::Ptr{Cvoid})::Cvoid
    box = unsafe_pointer_to_objref(data)::Base.RefValue{Any}
    lock(_RETIRE_LOCK)
    try
        delete!(_RETIRE_ROOTS, box) # called exactly once
    finally
        unlock(_RETIRE_LOCK)
    end
    try
        _as_callback(box[])
    catch e
        # Nothing may unwind through C; there is no caller to tell.
        Core.println(Core.stderr, "TenferroGPU: a retire release function threw: ", e)
    end
    return nothing
end

"""
    retire(f, x::Stream or Runtime)
    retire(x) do ... end

Run `f()` once the device has finished the work queued on the stream
(`x`'s, or the calling task's stream of the `Runtime` `x`) before this
call, without making the host wait (`tf_workspace_retire`):
typically `free(buffer)` for a workspace that queued work still uses.  `f`
runs on the thread of a later `retire`, `poll_retirements` or
`sync_stream` (any slot), or at the runtime's teardown (possibly in a
finalizer), with the primary context current: it must not yield, and not
use the runtime being torn down.  An exception it throws is printed to
stderr.  When `retire` throws, `f` never runs: with
`TF_ERROR_INVALID_ARGUMENT` or `TF_ERROR_INVALID_HANDLE` the resource is
still yours; with any other status the device may still use it, so leak it.
"""
function retire(f, x::RuntimeHandle)
    trampoline = @cfunction(_release_trampoline, Cvoid, (Ptr{Cvoid}, Ptr{Cvoid}))
    box = Ref{Any}(f)
    lock(_RETIRE_LOCK)
    try
        _RETIRE_ROOTS[box] = nothing
    finally
        unlock(_RETIRE_LOCK)
    end
    ok = false
    try
        _with_stream(x, "tf_workspace_retire") do _, p
            check(GC.@preserve box L.tf_workspace_retire(p, C_NULL, trampoline, pointer_from_objref(box)))
        end
        ok = true
    finally
        if !ok # the library will never call it
            lock(_RETIRE_LOCK)
            try
                delete!(_RETIRE_ROOTS, box)
            finally
                unlock(_RETIRE_LOCK)
            end
        end
    end
    return nothing
end

"Run the releases of every retirement the device has passed, on all slots (`tf_workspace_poll`)."
poll_retirements(x::RuntimeHandle) = _with_ptr(p -> check(L.tf_workspace_poll(p)), x, "tf_workspace_poll")

"""
    retirement_stats(x::Runtime or Stream) -> NamedTuple

A consistent snapshot of the runtime's retirement counters
(`tf_workspace_stats`): `capacity`, `deferred`, `released`,
`barrier_fallbacks`, `leaked`, `in_flight`, `max_in_flight`.
"""
function retirement_stats(x::RuntimeHandle)
    s = _with_ptr(x, "tf_workspace_stats") do p
        out = Ref{L.tf_retirement_stats}()
        L.tf_retirement_stats_init(out)
        check(L.tf_workspace_stats(p, out))
        out[]
    end
    return (capacity=Int(s.capacity), deferred=s.deferred, released=s.released,
            barrier_fallbacks=s.barrier_fallbacks, leaked=s.leaked, in_flight=s.in_flight,
            max_in_flight=s.max_in_flight)
end

# ---- logging ------------------------------------------------------------------

const _log_lock = ReentrantLock()
const _log_root = Ref{Any}(nothing) # keeps the installed callback's box alive

function _log_trampoline(level::Int32, message::Cstring, data::Ptr{Cvoid})::Cvoid
    box = unsafe_pointer_to_objref(data)::Base.RefValue{Any}
    task_local_storage(:tenferro_in_log, true) do
        try
            _as_callback(() -> box[](level, unsafe_string(message)))
        catch
            # Nothing may unwind through C; the message is lost with the callback.
        end
    end
    return nothing
end

"""
    set_log_callback(f)
    set_log_callback(nothing)

Route the library's warnings (a context that could not be restored,
resources leaked at teardown) to `f(level::Int32, message::String)`, or back
to the default (stderr) with `nothing` (`tf_set_log_callback`).  `f` may run
inside a finalizer or on any thread, so it must not yield or do blocking
I/O: push the message to a lock-free place and handle it later.  Calling
`set_log_callback` from inside `f` throws `TF_ERROR_RUNTIME_STATE`.
"""
function set_log_callback(f)
    _need_library("tf_set_log_callback")
    if get(task_local_storage(), :tenferro_in_log, false)
        # The library refuses this itself; waiting for _log_lock could
        # deadlock with a set_log_callback that waits for this callback.
        check(L.tf_set_log_callback(C_NULL, C_NULL))
    end
    lock(_log_lock) do
        if f === nothing
            check(L.tf_set_log_callback(C_NULL, C_NULL))
            _log_root[] = nothing
        else
            box = Ref{Any}(f)
            trampoline = @cfunction(_log_trampoline, Cvoid, (Int32, Cstring, Ptr{Cvoid}))
            GC.@preserve box check(L.tf_set_log_callback(trampoline, pointer_from_objref(box)))
            _log_root[] = box # the previous box is no longer called: let it go
        end
    end
    return nothing
end
