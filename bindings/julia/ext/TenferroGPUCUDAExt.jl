# SPDX-License-Identifier: MIT OR Apache-2.0
"""
    TenferroGPUCUDAExt

Loaded by Julia when both TenferroGPU and CUDA.jl (5.4 or later) are: views
of the library's streams and device memory as CUDA.jl objects, so that
CUDA.jl's kernels and array operations run on a tenferro-gpu stream slot,
on memory the library allocated, in the same primary context.

- `CuStream(s::Stream)`: the `CUstream` of `s`'s slot.  CUDA.jl never
  destroys it (the library owns it until the runtime is torn down).
- `unsafe_wrap(CuArray, b::DeviceBuffer[, dims])`: a `CuArray` on `b`'s
  memory, which CUDA.jl never frees.
- `CuContext(x::Runtime or Stream)`: the runtime's primary context;
  `DevicePtr(p::CuPtr)` and `convert(CuPtr{T}, p::DevicePtr)`.

A view keeps its `Stream` or `DeviceBuffer` object (and through it the
runtime) alive as long as the view object lives, but `free(b)` or closing
the runtime still ends the memory or stream: use a view only while they
are open.  Arrays derived from a view (`view`, `reshape`) do not keep it
alive; keep the view.
"""
module TenferroGPUCUDAExt

using TenferroGPU: TenferroGPU, Stream, DeviceBuffer, DevicePtr, RuntimeHandle, primary_context, raw_stream
import CUDA
using CUDA: CuStream, CuArray, CuPtr, CuContext

# ---- the owner of a view lives as long as the view ---------------------------

# Roots by a number, not by the view: a table keyed by the view would keep
# it alive, and a CuArray's hash reads its elements.
const _ROOTS_LOCK = Threads.SpinLock() # finalizers take it: must not yield
const _ROOTS = Dict{UInt64,Any}()
const _NEXT_ROOT = Threads.Atomic{UInt64}(0)

function _keep_alive(view, owner)
    key = Threads.atomic_add!(_NEXT_ROOT, UInt64(1))
    lock(_ROOTS_LOCK)
    try
        _ROOTS[key] = owner
    finally
        unlock(_ROOTS_LOCK)
    end
    finalizer(_ -> _unroot(key), view)
    return view
end

function _unroot(key::UInt64)
    lock(_ROOTS_LOCK)
    try
        delete!(_ROOTS, key)
    finally
        unlock(_ROOTS_LOCK)
    end
    return nothing
end

# ---- contexts and pointers ------------------------------------------------------

"The runtime's primary context as a CUDA.jl `CuContext` (the one CUDA.jl uses for the device too)."
CUDA.CuContext(x::RuntimeHandle) = CuContext(convert(fieldtype(CuContext, :handle), primary_context(x)))

TenferroGPU.DevicePtr(p::CuPtr) = DevicePtr(UInt64(UInt(p)))
Base.convert(::Type{CuPtr{T}}, p::DevicePtr) where {T} = CuPtr{T}(UInt(p.addr))

# ---- streams --------------------------------------------------------------------

# CUDA.jl makes a CuStream only for a stream it creates (which its finalizer
# destroys) or for its special streams, so the view is built field by field
# from the layouts CUDA.jl has had since 5.4 (handle, valid, ctx) and before
# (handle, ctx).  It gets no finalizer: the stream stays the library's.
let fields = fieldnames(CuStream), H = fieldtype(CuStream, :handle)
    made = if fields == (:handle, :valid, :ctx)
        Expr(:new, CuStream, :(convert($H, handle)), true, :ctx)
    elseif fields == (:handle, :ctx)
        Expr(:new, CuStream, :(convert($H, handle)), :ctx)
    else
        :(throw(ErrorException($("TenferroGPUCUDAExt knows no CuStream with the fields $fields"))))
    end
    @eval _custream(handle::Ptr{Cvoid}, ctx::CuContext) = $made
end

"""
    CuStream(s::TenferroGPU.Stream) -> CuStream

A CUDA.jl view of the `CUstream` of `s`'s slot, in the runtime's primary
context: `CUDA.stream!(CuStream(s)) do ... end` queues CUDA.jl's work on
it, ordered with the work `s` queues.  CUDA.jl never destroys the stream;
the view keeps `s` alive, and is valid while `s` (or another handle of the
runtime) is open.
"""
CUDA.CuStream(s::Stream) = _keep_alive(_custream(raw_stream(s), CuContext(s)), s)

# ---- device memory --------------------------------------------------------------

"""
    unsafe_wrap(CuArray, b::DeviceBuffer{T}, dims = (length(b),)) -> CuArray{T}

A `CuArray` on `b`'s device memory (no copy; `prod(dims) <= length(b)`),
in the primary context of `b`'s runtime.  CUDA.jl never frees it: it stays
`b`'s, valid until `free(b)`; the view keeps `b` alive.  CUDA.jl orders its
operations on its own task stream: to order them with `b`'s transfers, run
them on `CuStream(s)` of the `Stream` `s` that `b` uses, or synchronize
between the two.
"""
function Base.unsafe_wrap(::Type{CuArray}, b::DeviceBuffer{T}, dims::NTuple{N,Int}) where {T,N}
    pointer(b).addr == 0 && throw(ArgumentError("the DeviceBuffer holds no memory (freed, or empty)"))
    prod(dims) <= length(b) ||
        throw(DimensionMismatch("dims $dims need $(prod(dims)) elements; the DeviceBuffer has $(length(b))"))
    a = unsafe_wrap(CuArray, CuPtr{T}(UInt(pointer(b).addr)), dims; own=false, ctx=CuContext(b.rt))
    return _keep_alive(a, b)
end

Base.unsafe_wrap(::Type{CuArray}, b::DeviceBuffer) = unsafe_wrap(CuArray, b, (length(b),))
Base.unsafe_wrap(::Type{CuArray}, b::DeviceBuffer, n::Integer) = unsafe_wrap(CuArray, b, (Int(n),))

end # module
