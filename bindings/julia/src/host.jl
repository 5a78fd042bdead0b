# SPDX-License-Identifier: MIT OR Apache-2.0
# Page-locked host memory and asynchronous copies (tf_host_alloc ..
# tf_upload_async, new in 1.1; docs/transfers.md, "Page-locked host memory"
# and "Asynchronous copies").  Against a 1.0 library these calls throw a
# TenferroError with TF_ERROR_NOT_SUPPORTED (_need_function).
#
# Lifetimes.  A block and a registration each hold a C reference to their
# runtime of their own (tf_runtime_retain of the pointer), released right
# after the block is freed or the range unregistered: the order does not
# depend on which Julia finalizer runs first.

# What the finalizer of a host_alloc block frees: the block and the runtime
# reference it holds.  `done` makes the free happen once.
mutable struct HostBuffer
    rt::Ptr{L.tf_runtime}   # retained for the block
    ptr::Ptr{Cvoid}
    nbytes::Int
    @atomic done::Bool
    range::_HostRange
end

# tf_host_free (after waiting for a failed copy's stream, failed_copy.jl),
# then the runtime reference; the error, or nothing.  Never throws or
# yields (it runs in finalizers).
function _free_block(hb::HostBuffer)
    (@atomicswap hb.done = true) && return nothing
    _untrack(hb.range)
    err = _settle(hb.range)
    if err === nothing
        status = L.tf_host_free(hb.rt, hb.ptr)
        status == L.TF_OK || (err = _last_error(status))
    else
        _drop_holds(hb.range) # the device may still use it
        err = _held_error("tf_host_free", "the block was leaked on purpose, never to be reused", err)
    end
    L.tf_runtime_release(hb.rt)
    return err
end

# Retains x's runtime pointer for an object of its own: the returned
# pointer needs one tf_runtime_release.
function _retained(x::RuntimeHandle, op)
    _with_ptr(x, op) do p
        check(L.tf_runtime_retain(p))
        return p
    end
end

# The Array over a block, and the object whose finalizer frees it: the one
# that every array made of it keeps reachable.  From Julia 1.11 an Array is
# a view of a Memory, and reshape, vec and views share the Memory without
# keeping the Array that host_alloc returned: the finalizer goes on the
# Memory.  Before, reshape and vec keep their parent Array, which owns the
# data.
@static if VERSION >= v"1.11"
    _block_owner(a::Array) = getfield(getfield(a, :ref), :mem)
else
    _block_owner(a::Array) = a
end

"""
    host_alloc(x::Stream or Runtime, T, dims...) -> Array{T}

An `Array{T}` of `dims` over page-locked host memory from the runtime's
caching pool (`tf_host_alloc`): the host side of [`download_async!`](@ref)
and [`upload_async!`](@ref).  Not zeroed; `T` is a bits type.  The block
lives as long as any array made of it (`A` itself, `reshape`, `vec`,
views): when the garbage collector has collected all of them, or at
[`free`](@ref)`(A)`, it goes back to the pool (`tf_host_free`), which is
safe while a copy still uses it (the pool reuses it only once the device
is done).  Do not use `A` or arrays made of it after `free(A)`, and do not
`resize!` it.  The block holds a reference to its runtime until then.
Throws `TF_ERROR_INVALID_ARGUMENT` for 0 bytes, `TF_ERROR_OUT_OF_MEMORY`
when page-locked memory is exhausted.
"""
function host_alloc(x::RuntimeHandle, ::Type{T}, dims::Integer...) where {T}
    op = "tf_host_alloc"
    _need_function(op)
    _bits(T, op)
    all(d -> d >= 0, dims) || throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "dimensions $dims"))
    n = size_arg(op, "bytes", Int128(prod(Int128.(dims); init=Int128(1))) * sizeof(T))
    rt = _retained(x, op)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    status = L.tf_host_alloc(rt, n, out)
    if status != L.TF_OK
        err = _last_error(status) # copied before another call can overwrite it
        L.tf_runtime_release(rt)
        throw(err)
    end
    range = _track(out[], n)
    hb = HostBuffer(rt, out[], Int(n), false, range)
    range.block = hb
    a = unsafe_wrap(Array, Ptr{T}(out[]), Int.(dims); own=false)
    finalizer(_ -> (_free_block(hb); nothing), _block_owner(a))
    return a
end

"""
    free(A::Array)

Give the block of a [`host_alloc`](@ref) array back to the pool now
(`tf_host_free`) instead of when the garbage collector collects it: `A`
and every array made of it must not be used afterwards.  `A` may be any
array that starts at the block (`reshape(A, ...)`, `vec(A)`).  Safe while
an asynchronous copy still uses the block (the pool waits).  After a
failed synchronous copy through the block (`download!`, `upload!`) it
first waits for that copy's stream when the pool could not be told of it,
and leaks the block if that wait fails too (the thrown error says so).
Throws `TF_ERROR_INVALID_ARGUMENT` for an array that does not start at a
live block (also a second `free`).  On Julia 1.9 and 1.10 `finalize(A)`
does the same; from 1.11 the block's finalizer is no longer `A`'s.
"""
function free(a::Array)
    op = "tf_host_free"
    r = _range_holding(UInt(pointer(a)))
    if r === nothing || !(r.block isa HostBuffer) || r.start != UInt(pointer(a))
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op,
                            "the array does not start at a live host_alloc block (freed already?)"))
    end
    err = _free_block(r.block)
    err === nothing || throw(err)
    return nothing
end

"""
    record_use(x::Stream or Runtime, A::Array)

Note that work you queued yourself on the stream (`x`, or the calling
task's stream of the `Runtime` `x`) reads or writes `A`, a
[`host_alloc`](@ref) array or registered memory, so that freeing the block
waits for it (`tf_host_record_use`).  The asynchronous copies record their
own uses.
"""
function record_use(x::RuntimeHandle, a::Array)
    op = "tf_host_record_use"
    _need_function(op)
    GC.@preserve a _with_stream((_, p) -> check(L.tf_host_record_use(p, pointer(a))), x, op)
    return nothing
end

"""
    Registration

Memory of the caller's page-locked for a runtime ([`host_register`](@ref)):
the asynchronous copies accept it until [`unregister`](@ref).
"""
mutable struct Registration
    rt::Ptr{L.tf_runtime}   # retained for the range
    array::Array            # the array registered
    ptr::Ptr{Cvoid}         # the range: the array's data when registered
    memory::Any             # keeps that data alive while registered (_registered_memory)
    @atomic registered::Bool
    range::_HostRange
end

# What keeps a registered array's data alive, wherever resize! moves the
# array.  From Julia 1.11 resize! gives the array a new Memory and leaves
# the old one (the registered one) to whoever holds it: the Registration.
# Before, resize! frees the old data at once, unless the array shares it:
# a second array over the same data makes Julia refuse to resize it.
@static if VERSION >= v"1.11"
    _registered_memory(a::Array) = _block_owner(a)
else
    _registered_memory(a::Array) = reshape(a, (length(a), 1))
end

"""
    host_register(x::Stream or Runtime, A::Array) -> Registration
    host_register(f, x, A)

Page-lock `A`'s memory for the runtime (`tf_host_register`), so that the
asynchronous copies accept it, until [`unregister`](@ref); the
`Registration` keeps `A`'s memory alive meanwhile, and it is that memory
that stays registered: from Julia 1.11 a `resize!` of `A` moves `A` off
it (later copies through `A` are refused as untracked), and on 1.9 and
1.10 `A` can no longer be resized at all (Julia refuses to resize shared
data, also after `unregister`).  A `Registration`
garbage-collected while registered is unregistered by its finalizer (tried
again at a later collection if that fails).  Throws
`TF_ERROR_INVALID_ARGUMENT` for an empty array, one overlapping a range the
runtime tracks, or memory already page-locked.  The do-block form
unregisters when `f(reg)` returns.
"""
function host_register(x::RuntimeHandle, a::Array{T}) where {T}
    op = "tf_host_register"
    _need_function(op)
    _bits(T, op)
    rt = _retained(x, op)
    ptr = Ptr{Cvoid}(pointer(a))
    memory = _registered_memory(a)
    range = _track(ptr, sizeof(a))
    status = GC.@preserve a L.tf_host_register(rt, ptr, sizeof(a))
    if status != L.TF_OK
        err = _last_error(status)
        _untrack(range)
        L.tf_runtime_release(rt)
        throw(err)
    end
    return finalizer(_finalize_registration, Registration(rt, a, ptr, memory, true, range))
end

function host_register(f::Function, x::RuntimeHandle, a::Array)
    reg = host_register(x, a)
    try
        return f(reg)
    finally
        unregister(reg)
    end
end

Base.isopen(reg::Registration) = @atomic reg.registered

# A finalizer must not throw or yield: the plain blocking calls, and on a
# failure the finalizer again for a later collection (the device may still
# use the memory, which the Registration keeps).
function _finalize_registration(reg::Registration)
    (@atomic reg.registered) || return nothing
    if _settle(reg.range) === nothing &&
       GC.@preserve(reg, L.tf_host_unregister(reg.rt, reg.ptr)) == L.TF_OK
        @atomic reg.registered = false
        _untrack(reg.range)
        L.tf_runtime_release(reg.rt)
    else
        finalizer(_finalize_registration, reg)
    end
    return nothing
end

"""
    unregister(reg::Registration)

Wait for the streams that used the range, then unregister it
(`tf_host_unregister`) and release the runtime reference; a second call
does nothing.  The wait lets other threads' garbage collections proceed
in wait mode `:gc_safe` ([`TenferroGPU.wait_mode`](@ref)); otherwise it is
a plain blocking call (there is no event to poll).  After a failed
synchronous copy through the range (`download!`, `upload!`) the wait
covers that copy's stream too.  On an error the range stays registered:
call again, or leave it to the finalizer or the runtime's last release;
keep the array meanwhile (the `Registration` does).
"""
function unregister(reg::Registration)
    op = "tf_host_unregister"
    (@atomic reg.registered) || return nothing
    _need_function(op)
    err = _settle(reg.range)
    err === nothing || throw(_held_error(op, "the range stays registered", err))
    status = GC.@preserve reg _host_unregister_c(reg.rt, reg.ptr, _gc_safe())
    check(status)
    if (@atomicswap reg.registered = false)
        _untrack(reg.range)
        L.tf_runtime_release(reg.rt)
    end
    return nothing
end

@static if GC_SAFE_CCALL
    _host_unregister_c(rt, p, safe::Bool) =
        safe ? L.tf_host_unregister_gc_safe(rt, p) : L.tf_host_unregister(rt, p)
else
    _host_unregister_c(rt, p, ::Bool) = L.tf_host_unregister(rt, p)
end

# Queues one asynchronous copy on the stream and records a new Event after
# it.  The event is made first, so that failing to make it queues nothing.
function _queue_async(call, x::RuntimeHandle, op, a::Array)
    _need_function(op)
    ev = Event(x)
    try
        GC.@preserve a _with_stream((_, p) -> check(call(p, pointer(a))), x, op)
    catch
        close(ev)
        rethrow()
    end
    try
        record!(x, ev)
    catch
        close(ev) # the copy is queued: sync_stream before touching the memory
        rethrow()
    end
    return ev
end

"""
    download_async!(x::Stream or Runtime, dst::Array, src::DevicePtr) -> Event
    download_async!(dst::Array, b::DeviceBuffer) -> Event

Queue a copy of `sizeof(dst)` bytes of device memory at `src` (or the
start of `b`) into `dst`, after the work queued on the stream (`x`, or the
calling task's stream of the `Runtime` `x`; `b`'s stream), and return at
once an [`Event`](@ref) recorded after it (`tf_download_async`, then
`tf_event_record`).  `dst` must lie wholly inside one [`host_alloc`](@ref)
array or [`host_register`](@ref)ed array of the runtime (for part of one,
`unsafe_wrap` the part and keep the whole reachable); other memory throws
`TF_ERROR_INVALID_ARGUMENT`, never a silent synchronous copy.  `dst`
belongs to the device until the event is done: wait with
[`sync_event`](@ref) (which lets garbage collections proceed, as every wait
here does) or ask with [`isdone`](@ref); `wait_event` orders another stream
after the copy.  Close the event when done with it.  If recording the event
fails the copy is queued anyway: `sync_stream` before touching `dst`.
"""
function download_async!(x::RuntimeHandle, dst::Array{T}, src::DevicePtr) where {T}
    _bits(T, "tf_download_async")
    n = sizeof(dst)
    return _queue_async((p, d) -> L.tf_download_async(p, src.addr, d, n), x, "tf_download_async", dst)
end

"""
    upload_async!(x::Stream or Runtime, dst::DevicePtr, src::Array) -> Event
    upload_async!(b::DeviceBuffer, src::Array) -> Event

Queue a copy of `src` to device memory at `dst` (or the start of `b`)
after the work queued on the stream, and return at once an
[`Event`](@ref) recorded after it (`tf_upload_async`, then
`tf_event_record`).  `src` must lie inside a [`host_alloc`](@ref) or
registered array of the runtime, as for [`download_async!`](@ref); the
device reads it when the copy runs, so keep it unchanged until the event
is done.
"""
function upload_async!(x::RuntimeHandle, dst::DevicePtr, src::Array{T}) where {T}
    _bits(T, "tf_upload_async")
    n = sizeof(src)
    return _queue_async((p, s) -> L.tf_upload_async(p, s, dst.addr, n), x, "tf_upload_async", src)
end

function download_async!(dst::Array{T}, b::DeviceBuffer{T}) where {T}
    length(dst) <= b.length ||
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, "tf_download_async",
                            "$(length(dst)) elements are more than the buffer's $(b.length)"))
    return download_async!(b.rt, dst, b.ptr)
end

function upload_async!(b::DeviceBuffer{T}, src::Array{T}) where {T}
    length(src) <= b.length ||
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, "tf_upload_async",
                            "$(length(src)) elements do not fit a buffer of $(b.length)"))
    return upload_async!(b.rt, b.ptr, src)
end

"""
    HostPoolStats

A consistent snapshot of a runtime's page-locked memory counters
(`tf_host_pool_stats`, from [`host_stats`](@ref)).  Bytes are size classes,
what the driver holds: `bytes_in_use + bytes_cached` is what the pool holds
from the driver; `pending_frees <= blocks_cached`.
"""
struct HostPoolStats
    bytes_in_use::UInt64
    bytes_cached::UInt64
    bytes_registered::UInt64
    blocks_in_use::UInt64
    blocks_cached::UInt64
    driver_allocations::UInt64
    pending_frees::UInt64
end

"The runtime's [`HostPoolStats`](@ref) (`tf_host_stats`)."
function host_stats(x::RuntimeHandle)
    s = _read_stats(x, "tf_host_stats", L.tf_host_stats, "tf_host_pool_stats_init",
                    L.tf_host_pool_stats_init, L.tf_host_pool_stats)
    return HostPoolStats(s.bytes_in_use, s.bytes_cached, s.bytes_registered, s.blocks_in_use,
                         s.blocks_cached, s.driver_allocations, s.pending_frees)
end

"Give every cached block that no stream still uses back to the driver (`tf_host_trim`)."
host_trim(x::RuntimeHandle) = _call_optional(L.tf_host_trim, x, "tf_host_trim")
