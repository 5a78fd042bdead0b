# SPDX-License-Identifier: MIT OR Apache-2.0
# Waiting for the device without stalling the garbage collector.
#
# tf_runtime_sync, tf_event_synchronize, tf_download and tf_download_scalar
# block the calling thread until the device is done.  A thread inside a
# plain ccall is in Julia's GC-unsafe state, so a collection any other
# thread starts waits until the call returns: every thread stops for as
# long as the device takes.  Three ways to wait, chosen once in __init__:
#
#   :gc_safe  (Julia 1.12 and later, the default there) the blocking call
#             through @ccall gc_safe=true: the collector runs meanwhile;
#   :poll     (the default before 1.12) record an event after the work,
#             query it (tf_event_query never waits), yield() and then
#             sleep between queries, then make the blocking call, which
#             returns at once and reports errors as usual;
#   :block    the plain blocking call.
#
# The environment variable TENFERRO_GPU_WAIT (gc_safe, poll, block or auto)
# overrides the default.  Inside a function the library calls (a
# stream_enqueue or cublas_enqueue body, a release) the task must not
# yield, so :poll makes the blocking call there.

"Whether this Julia has `@ccall gc_safe=true` (Julia 1.12)."
const GC_SAFE_CCALL = VERSION >= v"1.12"

"Environment variable choosing how blocking calls wait (read when the package loads)."
const WAIT_ENV = "TENFERRO_GPU_WAIT"

const _WAIT_MODES = (:gc_safe, :poll, :block)
const _WAIT_MODE = Ref(:block)

_default_wait_mode() = GC_SAFE_CCALL ? :gc_safe : :poll

function _init_wait_mode()
    v = get(ENV, WAIT_ENV, "")
    mode = v == "" || v == "auto" ? _default_wait_mode() : Symbol(v)
    if !(mode in _WAIT_MODES) || (mode === :gc_safe && !GC_SAFE_CCALL)
        @warn "$WAIT_ENV=$v is not one of auto, gc_safe (Julia 1.12 or later), poll, block: " *
              "waiting with $(_default_wait_mode())"
        mode = _default_wait_mode()
    end
    _WAIT_MODE[] = mode
    return nothing
end

"""
    TenferroGPU.wait_mode() -> Symbol

How blocking calls (`sync_stream`, `sync_event`, `download!`,
`download_scalar`) wait: `:gc_safe` (Julia 1.12 or later: the call blocks
in a GC-safe region, so other threads' garbage collections proceed),
`:poll` (before 1.12: an event is queried, the task yielding and sleeping
in between, before the call) or `:block` (a plain blocking call, which
holds up every other thread's garbage collection until it returns).  Set
by the environment variable `TENFERRO_GPU_WAIT` (`auto`, `gc_safe`, `poll`,
`block`) when the package loads.
"""
wait_mode() = _WAIT_MODE[]

# The blocking C calls, gc_safe when `safe` (only :gc_safe passes true).
@static if GC_SAFE_CCALL
    _sync_c(p, safe::Bool) = safe ? L.tf_runtime_sync_gc_safe(p) : L.tf_runtime_sync(p)
    _event_sync_c(e, safe::Bool) = safe ? L.tf_event_synchronize_gc_safe(e) : L.tf_event_synchronize(e)
    _download_c(p, src, dst, n, safe::Bool) =
        safe ? L.tf_download_gc_safe(p, src, dst, n) : L.tf_download(p, src, dst, n)
    _download_scalar_c(p, src, out, n, safe::Bool) =
        safe ? L.tf_download_scalar_gc_safe(p, src, out, n) : L.tf_download_scalar(p, src, out, n)
else
    _sync_c(p, ::Bool) = L.tf_runtime_sync(p)
    _event_sync_c(e, ::Bool) = L.tf_event_synchronize(e)
    _download_c(p, src, dst, n, ::Bool) = L.tf_download(p, src, dst, n)
    _download_scalar_c(p, src, out, n, ::Bool) = L.tf_download_scalar(p, src, out, n)
end

_gc_safe() = _WAIT_MODE[] === :gc_safe

# Queries an event until it is done.  Stops at the first failed query: the
# blocking call that follows reports the failure with its own name.
function _poll_event(e::Ptr{L.tf_event})
    done = Ref{Int32}(0)
    polls = 0
    while true
        L.tf_event_query(e, done) == L.TF_OK || return nothing
        done[] != 0 && return nothing
        polls += 1
        # Short waits end within a few yields; long ones sleep (1 ms, the
        # scheduler's resolution) so the thread does not spin.
        polls <= 64 ? yield() : sleep(0.001)
    end
end

# With :poll, outside a library callback and while no capture of this
# binding is open: waits (yielding) until the work queued on the stream
# before this call is done.  p is s's pointer, held.  (The polling event's
# record would go into a capture of the slot, as a node of its graph; the
# blocking call instead refuses there, and elsewhere blocks.)
function _poll_stream(s::Stream, p::Ptr{L.tf_runtime})
    (_WAIT_MODE[] === :poll && !_in_callback() && _OPEN_CAPTURES[] == 0) || return nothing
    e = _stream_event(s, p)
    e == C_NULL && return nothing # no event: the blocking call waits
    L.tf_event_record(p, e) == L.TF_OK || return nothing
    _poll_event(e)
end

# The stream's polling event, made at its first use; C_NULL when it cannot
# be made (the blocking call then waits, and reports what is wrong).
function _stream_event(s::Stream, p::Ptr{L.tf_runtime})
    e = @atomic s.poll_event
    e != C_NULL && return e
    out = Ref{Ptr{L.tf_event}}(C_NULL)
    L.tf_event_new(p, out) == L.TF_OK || return Ptr{L.tf_event}(C_NULL)
    old, won = @atomicreplace s.poll_event Ptr{L.tf_event}(C_NULL) => out[]
    won && return out[]
    L.tf_event_release(out[]) # another task made one first
    return old
end

"""
    sync_stream(x::Stream or Runtime)

Wait until the work queued on the stream (`x`, or the calling task's stream
of the `Runtime` `x`) is done, then run the retirements the device has
passed (`tf_runtime_sync`).  Other slots are not waited for.  The wait lets
other threads' garbage collections proceed ([`TenferroGPU.wait_mode`](@ref)).
"""
sync_stream(x::RuntimeHandle) = _with_stream(x, "tf_runtime_sync") do s, p
    _poll_stream(s, p)
    check(_sync_c(p, _gc_safe()))
end
