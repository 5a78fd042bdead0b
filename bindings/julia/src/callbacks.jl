# Julia functions called by the library: with_context's body and the log
# callback.  An exception must never unwind through the library's C frames,
# so the trampolines catch it and the caller rethrows it after the library
# has restored the context.

mutable struct ContextCall
    f::Any
    result::Any
    exception::Any # what f threw, or nothing
end

function _context_trampoline(data::Ptr{Cvoid})::Int32
    call = unsafe_pointer_to_objref(data)::ContextCall
    try
        call.result = call.f()
        return Int32(0)
    catch e
        call.exception = e
        return Int32(-1)
    end
end

"""
    with_context(f, rt::Runtime)
    with_context(rt) do ... end

Call `f()` with the runtime's primary context current on the calling thread
and restore the thread's previous context afterwards (`tf_with_context`);
return what `f` returns.  An exception thrown by `f` is rethrown once the
context is restored.  `f` must not yield (I/O, `wait`, `@sync`, locks that
block): the task could resume on another thread, where the context is not
current.
"""
function with_context(f, rt::Runtime)
    call = ContextCall(f, nothing, nothing)
    trampoline = @cfunction(_context_trampoline, Int32, (Ptr{Cvoid},))
    _with_ptr(rt, "tf_with_context") do p
        status = GC.@preserve call L.tf_with_context(p, trampoline, pointer_from_objref(call))
        call.exception === nothing && check(status)
    end
    call.exception === nothing || throw(call.exception)
    return call.result
end

# ---- logging ------------------------------------------------------------------

const _log_lock = ReentrantLock()
const _log_root = Ref{Any}(nothing) # keeps the installed callback's box alive

function _log_trampoline(level::Int32, message::Cstring, data::Ptr{Cvoid})::Cvoid
    box = unsafe_pointer_to_objref(data)::Base.RefValue{Any}
    task_local_storage(:tenferro_in_log, true) do
        try
            box[](level, unsafe_string(message))
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
