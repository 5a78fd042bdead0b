# SPDX-License-Identifier: MIT OR Apache-2.0
# Graph capture (docs/graphs.md): the work a do-block queues on a stream
# becomes a KernelGraph that runs again with one launch.  New in 1.2: on an
# older library the calls throw TF_ERROR_NOT_SUPPORTED (_need_function).
# The names say "graph": CUDA.jl exports capture, launch and update.

"""
    KernelGraph

An executable CUDA graph of one runtime (`tf_graph`): the work captured on a
stream ([`capture_graph`](@ref)), which [`launch_graph`](@ref) queues again
on any stream of that runtime, with the parameters captured, on whatever the
memory holds when it runs.  It keeps its runtime alive, and uses device
memory by address at every launch: keep the buffers and modules it uses
alive while it may run.  One reference: [`retain`](@ref) adds another,
`close` releases it (launches still queued finish first), and a finalizer
releases one never closed.
"""
mutable struct KernelGraph <: TenferroHandle
    ptr::Ptr{L.tf_graph}
    @atomic state::Int

    KernelGraph(ptr::Ptr{L.tf_graph}) = _finalized(new(ptr, 0))
end

_kind(::KernelGraph) = "KernelGraph"
_release_op(::KernelGraph) = "tf_graph_release"
# Neither throws or yields, as finalizers need; a library without it
# made no graph.
_release_c(g::KernelGraph) = L.tf_graph_release(g.ptr)

"""
    capture_graph(f, x::Stream or Runtime) -> KernelGraph

Capture the work `f(s)` queues on the stream `s` (`x`, or the calling
task's stream of the `Runtime` `x`) into a new [`KernelGraph`](@ref)
(`tf_graph_capture_begin`, `tf_graph_capture_end`):

    g = capture_graph(s) do s
        launch_kernel(s, add, x, y, out, UInt32(n); grid=cld(n, 256), block=256)
        copyto!(copied, out)
    end

While `f` runs, every call that only queues work on the slot (kernels,
`cublas_enqueue`, `stream_enqueue`, copies, the asynchronous copies, events,
`slot_wait`), through any handle of the slot from any task, is captured, not
run.  Calls that would wait (`sync_stream`, downloads, uploads,
`download_scalar`, `retire`, `poll_retirements`, a graph's launch, another
capture of the slot), `alloc` and `free` throw `TF_ERROR_RUNTIME_STATE` and
leave the capture intact.  Other slots work as usual.

When `f` throws, or the end fails, the capture is aborted
(`tf_graph_capture_abort`) and the exception rethrown; the slot then works
as before.  Only an abort that fails twice (a device fault, say) leaves the
slot capturing: that is logged, and the runtime's teardown drops it.
"""
function capture_graph(f, x::RuntimeHandle)
    return _run_capture(f, x, "tf_graph_capture_end") do p
        out = Ref{Ptr{L.tf_graph}}(C_NULL)
        check(L.tf_graph_capture_end(p, out))
        return KernelGraph(out[])
    end
end

"""
    update_graph!(f, g::KernelGraph, x::Stream or Runtime) -> Bool

Capture the work `f(s)` queues, as [`capture_graph`](@ref) does, into `g`
(`tf_graph_capture_update`): from its next launch on, `g` (and every
`retain` of it) runs the new work; launches already queued run the earlier
work.  Returns `true` when the new work had `g`'s shape (the same calls in
the same order, other addresses or values) and `g` was updated in place,
far cheaper than an instantiation; `false` when it was instantiated anew.
After an exception `g` still runs its earlier work.  `x` must be a handle of
`g`'s runtime (`TF_ERROR_INVALID_ARGUMENT` otherwise).
"""
function update_graph!(f, g::KernelGraph, x::RuntimeHandle)
    op = "tf_graph_capture_update"
    return _run_capture(f, x, op) do p
        _with_ptr(g, op) do gp
            in_place = Ref{Int32}(0)
            check(L.tf_graph_capture_update(p, gp, in_place))
            return in_place[] != 0
        end
    end
end

# Captures this binding has open (wait.jl: no polling meanwhile).  One
# that could not be aborted stays counted: its slot still captures.
const _OPEN_CAPTURES = Threads.Atomic{Int}(0)

# Begins a capture on x's stream s, runs f(s), then finish(p) with s's
# pointer held, which ends the capture; aborts it when either throws.
function _run_capture(finish, f, x::RuntimeHandle, end_op)
    op = "tf_graph_capture_begin"
    _need_function(op)
    s = _with_stream(x, op) do s, p
        check(L.tf_graph_capture_begin(p))
        Threads.atomic_add!(_OPEN_CAPTURES, 1)
        return s # the task's stream stays its own: the end finds the same slot
    end
    try
        f(s)
        result = _with_ptr(finish, s, end_op)
        Threads.atomic_sub!(_OPEN_CAPTURES, 1)
        return result
    catch
        _abort_capture(s) && Threads.atomic_sub!(_OPEN_CAPTURES, 1)
        rethrow()
    end
end

# Ends s's capture, dropping what it captured; true once none is open
# (TF_ERROR_RUNTIME_STATE: none was, a failed end may have ended it).  The
# header says to call again after a failure; a second failure is logged.
function _abort_capture(s::Stream)
    op = "tf_graph_capture_abort"
    local err
    for _ in 1:2
        status = try
            _with_ptr(L.tf_graph_capture_abort, s, op)
        catch e
            err = e # the Stream was closed: its runtime's teardown drops the capture
            break
        end
        (status == L.TF_OK || status == L.TF_ERROR_RUNTIME_STATE) && return true
        err = _last_error(status)
    end
    @warn "the capture of slot $(s.slot) could not be aborted; the slot still captures until the runtime is torn down" exception = err
    return false
end

"""
    launch_graph(g::KernelGraph, x::Stream or Runtime)

Queue `g` on the stream (`x`, or the calling task's stream of the `Runtime`
`x`), after the work queued there and after `g`'s previous launch on any
stream, and return (`tf_graph_launch`).  `x` must be a handle of `g`'s
runtime: another runtime's, even of the same device, throws
`TF_ERROR_INVALID_ARGUMENT`, as does a launch whose page-locked memory was
freed or unregistered since the capture; `TF_ERROR_RUNTIME_STATE` while
the slot captures, or a slot the graph waits for does.  It takes no slot
lock: allowed inside `stream_enqueue` and `cublas_enqueue` bodies.
"""
function launch_graph(g::KernelGraph, x::RuntimeHandle)
    op = "tf_graph_launch"
    _need_function(op)
    _with_stream(x, op) do _, p
        _with_ptr(gp -> check(L.tf_graph_launch(p, gp)), g, op)
    end
    return nothing
end

"A new reference to the same graph (`tf_graph_retain`): it launches the same work."
function retain(g::KernelGraph)
    _with_ptr(g, "tf_graph_retain") do gp
        check(L.tf_graph_retain(gp))
        return KernelGraph(gp)
    end
end
