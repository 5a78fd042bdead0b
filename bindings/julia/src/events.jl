# SPDX-License-Identifier: MIT OR Apache-2.0
# Events: explicit ordering between slots, runtimes and the host.

"""
    Event(x::Runtime or Stream)
    Event(f, x)

A reference to a CUDA event in the runtime's primary context, timing
disabled (`tf_event_new`): [`record!`](@ref) it on one stream,
[`wait_event`](@ref) for it on another or [`sync_event`](@ref) on the host.
Until its first record, waiting for it returns at once.  It keeps its
runtime alive until its last reference is released (`close`, or a
finalizer).  The do-block form closes it when `f(event)` returns.
"""
mutable struct Event <: TenferroHandle
    ptr::Ptr{L.tf_event}
    @atomic state::Int

    Event(ptr::Ptr{L.tf_event}) = _finalized(new(ptr, 0))
end

_kind(::Event) = "Event"
_release_op(::Event) = "tf_event_release"
_release_c(ev::Event) = L.tf_event_release(ev.ptr)

function Event(rt::RuntimeHandle)
    _with_ptr(rt, "tf_event_new") do p
        out = Ref{Ptr{L.tf_event}}(C_NULL)
        check(L.tf_event_new(p, out))
        return Event(out[])
    end
end

Event(f::Function, rt::RuntimeHandle) = _closing(f, Event(rt))

"A new reference to the same event (`tf_event_retain`)."
function retain(ev::Event)
    _with_ptr(ev, "tf_event_retain") do e
        check(L.tf_event_retain(e))
        return Event(e)
    end
end

# Runs one call with the stream's and the event's pointers held.
function _with_event(f, x::RuntimeHandle, ev::Event, op)
    _with_stream(x, op) do _, p
        _with_ptr(e -> f(p, e), ev, op)
    end
end

"Record `ev` on the stream (`x`, or the calling task's stream of the `Runtime` `x`; `tf_event_record`)."
record!(x::RuntimeHandle, ev::Event) =
    _with_event((p, e) -> check(L.tf_event_record(p, e)), x, ev, "tf_event_record")

"Make the stream (`x`, or the calling task's stream of `x`) wait, on the device, for `ev`'s latest record (`tf_event_wait`)."
wait_event(x::RuntimeHandle, ev::Event) =
    _with_event((p, e) -> check(L.tf_event_wait(p, e)), x, ev, "tf_event_wait")

"""
    sync_event(ev::Event)

Block the task until `ev`'s latest record is done (`tf_event_synchronize`).
The wait lets other threads' garbage collections proceed: see
[`TenferroGPU.wait_mode`](@ref).
"""
sync_event(ev::Event) = _with_ptr(ev, "tf_event_synchronize") do e
    _WAIT_MODE[] === :poll && !_in_callback() && _poll_event(e)
    check(_event_sync_c(e, _gc_safe()))
end

"Whether `ev`'s latest record is done, without waiting (`tf_event_query`); true before any record."
isdone(ev::Event) = _query(L.tf_event_query, ev, "tf_event_query", Int32) != 0
