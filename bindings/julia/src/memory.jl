# SPDX-License-Identifier: MIT OR Apache-2.0
# Device memory and transfers of Julia arrays.

"""
    DevicePtr(addr)

An address of device memory (a `CUdeviceptr`).  A plain number: the garbage
collector neither sees nor frees device memory.  `p + bytes` offsets it.
"""
struct DevicePtr
    addr::UInt64
end

Base.:+(p::DevicePtr, bytes::Integer) = DevicePtr(p.addr + UInt64(bytes))
Base.UInt64(p::DevicePtr) = p.addr
Base.show(io::IO, p::DevicePtr) = print(io, "DevicePtr(0x", string(p.addr; base=16), ")")

_bits(::Type{T}, op) where {T} = isbitstype(T) ||
    throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "$T is not a bits type"))

"""
    alloc(x::Stream or Runtime, bytes) -> DevicePtr

Allocate `bytes` of device memory on the runtime's device, in order on the
stream (`x`, or the calling task's stream of the `Runtime` `x`; `tf_alloc`):
from the device's memory pool where it has one (usable at once by later
work on the stream; by other streams and the host after `sync_stream` on
it), else a plain cuMemAlloc.  0 bytes gives `DevicePtr(0)`.  Release it
with [`free`](@ref).
"""
function alloc(x::RuntimeHandle, bytes::Integer)
    n = size_arg("tf_alloc", "bytes", bytes)
    return DevicePtr(_stream_query((p, out) -> L.tf_alloc(p, n, out), x, "tf_alloc", UInt64))
end

"""
    free(x::Stream or Runtime, p::DevicePtr)

Release memory `alloc` returned, in order on the stream (`tf_free`): work
queued earlier on this stream may still use it; work on other streams that
uses it must be finished first, or recorded ([`record_use`](@ref)).
`DevicePtr(0)` is a no-op.
"""
free(x::RuntimeHandle, ptr::DevicePtr) = _with_stream((_, p) -> check(L.tf_free(p, ptr.addr)), x, "tf_free")

"""
    upload!(x::Stream or Runtime, dst::DevicePtr, src::Array)

Copy `src` to device memory at `dst`, in order on the stream (`x`, or the
calling task's stream of the `Runtime` `x`; `tf_upload`).  `src` may be
reused on return; later work on the same stream sees the data, other
streams after `sync_stream`.  After an error (other than
`TF_ERROR_INVALID_ARGUMENT`) the device may still read a `src` that lies
in a [`host_alloc`](@ref) block or registered array: freeing the block and
`unregister` wait for it.  Other arrays are never touched after the call.
"""
function upload!(x::RuntimeHandle, dst::DevicePtr, src::Array{T}) where {T}
    _bits(T, "tf_upload")
    _with_stream(x, "tf_upload") do _, p
        GC.@preserve src _check_copy(L.tf_upload(p, src, dst.addr, sizeof(src)), p, pointer(src))
    end
    return nothing
end

"""
    download!(x::Stream or Runtime, dst::Array, src::DevicePtr) -> dst

Copy `sizeof(dst)` bytes of device memory at `src` into `dst`, after the
work queued on the stream (`x`, or the calling task's stream of the
`Runtime` `x`; `tf_download`).  Julia arrays are pageable memory: bulk
downloads go through the library's pipelined staging.  The wait lets other
threads' garbage collections proceed ([`TenferroGPU.wait_mode`](@ref)).
After an error `dst` may be partly written.  Other arrays are never touched
after the call; a `dst` in a [`host_alloc`](@ref) block or registered
array may still be written by the device after an error other than
`TF_ERROR_INVALID_ARGUMENT`, and freeing the block and `unregister` wait
for that.
"""
function download!(x::RuntimeHandle, dst::Array{T}, src::DevicePtr) where {T}
    _bits(T, "tf_download")
    _with_stream(x, "tf_download") do s, p
        _poll_stream(s, p)
        GC.@preserve dst _check_copy(_download_c(p, src.addr, dst, sizeof(dst), _gc_safe()), p, pointer(dst))
    end
    return dst
end

"""
    download_scalar(T, x::Stream or Runtime, src::DevicePtr) -> T

Read one value of bits type `T` (at most 16 bytes) from device memory after
the work queued on the stream, through the slot's page-locked staging
(`tf_download_scalar`).  Waits as [`download!`](@ref) does.
"""
function download_scalar(::Type{T}, x::RuntimeHandle, src::DevicePtr) where {T}
    _bits(T, "tf_download_scalar")
    out = Ref{T}()
    _with_stream(x, "tf_download_scalar") do s, p
        _poll_stream(s, p)
        check(_download_scalar_c(p, src.addr, out, sizeof(T), _gc_safe()))
    end
    return out[]
end

"""
    device_copy!(x::Stream or Runtime, dst::DevicePtr, src::DevicePtr, bytes)

Copy `bytes` of device memory of the runtime's device, in order on the
stream (`tf_copy`); the ranges must not overlap.
"""
function device_copy!(x::RuntimeHandle, dst::DevicePtr, src::DevicePtr, bytes::Integer)
    n = size_arg("tf_copy", "bytes", bytes)
    _with_stream((_, p) -> check(L.tf_copy(p, src.addr, dst.addr, n)), x, "tf_copy")
    return nothing
end

"""
    peer_copy_available(src_rt, dst_rt) -> Bool

Whether copies from `src_rt`'s device to `dst_rt`'s run directly
(`tf_peer_copy_available`); always true on one device.
"""
function peer_copy_available(src_rt::RuntimeHandle, dst_rt::RuntimeHandle)
    _with_ptr(src_rt, "tf_peer_copy_available") do s
        _with_ptr(dst_rt, "tf_peer_copy_available") do d
            out = Ref{Int32}(0)
            check(L.tf_peer_copy_available(s, d, out))
            out[] != 0
        end
    end
end

"""
    peer_copy!(dst_rt, dst::DevicePtr, src_rt, src::DevicePtr, bytes)

Copy `bytes` from memory of `src_rt`'s device to memory of `dst_rt`'s
device, in order on `src_rt`'s stream (a `Stream`, or the calling task's
stream of a `Runtime`; `tf_peer_copy`).  `dst_rt`'s streams do not wait:
`sync_stream(src_rt)` before work on `dst_rt` uses the data.
"""
function peer_copy!(dst_rt::RuntimeHandle, dst::DevicePtr, src_rt::RuntimeHandle, src::DevicePtr,
                    bytes::Integer)
    n = size_arg("tf_peer_copy", "bytes", bytes)
    _with_stream(src_rt, "tf_peer_copy") do _, s
        _with_ptr(dst_rt, "tf_peer_copy") do d
            check(L.tf_peer_copy(s, src.addr, d, dst.addr, n))
        end
    end
    return nothing
end

"""
    DeviceBuffer{T}(x, n)
    DeviceBuffer(x, v::Vector{T})
    DeviceBuffer{T}(f, x, n); DeviceBuffer(f, x, v)

`n` elements of bits type `T` in device memory, allocated through `x` (a
`Stream`, or a `Runtime`: then the calling task's stream of it),
uninitialized or holding a copy of `v`.  Its transfers go through `x`, so
they are ordered with the rest of the stream's work.  Device memory is not
garbage collected: call [`free`](@ref), or use the do-block forms, which
free when `f(buf)` returns.  (A finalizer could free memory that work
queued on another stream still uses, so there is none.)
"""
mutable struct DeviceBuffer{T}
    rt::RuntimeHandle
    ptr::DevicePtr
    length::Int
end

function DeviceBuffer{T}(rt::RuntimeHandle, n::Integer) where {T}
    _bits(T, "tf_alloc")
    n >= 0 || throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, "tf_alloc", "length $n is negative"))
    return DeviceBuffer{T}(rt, alloc(rt, Int128(n) * sizeof(T)), Int(n))
end

function DeviceBuffer(rt::RuntimeHandle, v::Vector{T}) where {T}
    b = DeviceBuffer{T}(rt, length(v))
    try
        upload!(b, v)
    catch
        free(b)
        rethrow()
    end
    return b
end

function _freeing(f, b::DeviceBuffer)
    try
        return f(b)
    finally
        free(b)
    end
end

DeviceBuffer{T}(f::Function, rt::RuntimeHandle, n::Integer) where {T} = _freeing(f, DeviceBuffer{T}(rt, n))
DeviceBuffer(f::Function, rt::RuntimeHandle, v::Vector) = _freeing(f, DeviceBuffer(rt, v))

Base.length(b::DeviceBuffer) = b.length
Base.sizeof(b::DeviceBuffer{T}) where {T} = b.length * sizeof(T)
Base.eltype(::Type{DeviceBuffer{T}}) where {T} = T
Base.pointer(b::DeviceBuffer) = b.ptr

"Copy `v` (at most `length(b)` elements) to the start of `b`."
function upload!(b::DeviceBuffer{T}, v::Vector{T}) where {T}
    length(v) <= b.length ||
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, "tf_upload",
                            "$(length(v)) elements do not fit a buffer of $(b.length)"))
    return upload!(b.rt, b.ptr, v)
end

"Copy the first `length(v)` elements of `b` into `v`."
function download!(v::Vector{T}, b::DeviceBuffer{T}) where {T}
    length(v) <= b.length ||
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, "tf_download",
                            "$(length(v)) elements are more than the buffer's $(b.length)"))
    return download!(b.rt, v, b.ptr)
end

"The whole buffer downloaded into a new `Vector`."
Base.Vector(b::DeviceBuffer{T}) where {T} = download!(Vector{T}(undef, b.length), b)
Base.collect(b::DeviceBuffer) = Vector(b)

"""
    copyto!(dst::DeviceBuffer, src::DeviceBuffer)

Copy `src` into `dst` on the device (`tf_copy`, in order on `dst`'s
stream).  When `src` is freed on another stream, its use is recorded
([`record_use`](@ref)), so that its `free` waits for the copy.
"""
function Base.copyto!(dst::DeviceBuffer{T}, src::DeviceBuffer{T}) where {T}
    length(src) <= length(dst) ||
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, "tf_copy",
                            "$(length(src)) elements do not fit a buffer of $(length(dst))"))
    n = size_arg("tf_copy", "bytes", sizeof(src))
    _with_stream(dst.rt, "tf_copy") do s, p
        check(L.tf_copy(p, src.ptr.addr, dst.ptr.addr, n))
        _record_operands(s, p, (src,))
    end
    return dst
end

"Release the buffer's memory through its runtime (`tf_free`); a second call does nothing."
function free(b::DeviceBuffer)
    b.ptr.addr == 0 && return nothing
    free(b.rt, b.ptr)
    b.ptr, b.length = DevicePtr(0), 0
    return nothing
end
