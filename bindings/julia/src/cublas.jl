# SPDX-License-Identifier: MIT OR Apache-2.0
# cuBLAS on the slot streams, through the cuBLAS the library loaded.

"""
    CublasError(status)

A cuBLAS call made in a `cublas_enqueue` body failed with `status` (a
`cublasStatus_t`).  Thrown by [`sgemm!`](@ref) and [`dgemm!`](@ref); when
it leaves the body, `cublas_enqueue` throws the library's `TenferroError`
(`TF_ERROR_PROVIDER`, code domain `TF_CODE_CUBLAS`, the status as its code)
instead.
"""
struct CublasError <: Exception
    status::Int32
end

Base.showerror(io::IO, e::CublasError) = print(io, "CublasError: cublasStatus_t ", e.status)

"""
What a `cublas_enqueue` body receives: the slot's cuBLAS handle (`handle`,
a `cublasHandle_t`) and stream (`stream`, a `CUstream`), and the pointer
mode set for the call.  Valid only while the body runs.
"""
mutable struct CublasCall
    handle::Ptr{Cvoid}
    stream::Ptr{Cvoid}
    mode::Int32
    valid::Bool
end

CublasCall(handle, stream, mode) = CublasCall(handle, stream, mode, true)

"""
    cublas_enqueue(f, x::Stream or Runtime, mode = :host)
    cublas_enqueue(x[, mode]) do c::CublasCall ... end

Call `f(c)` with the cuBLAS handle of the stream's slot (`x`, or the
calling task's stream of the `Runtime` `x`), its pointer mode set to
`mode` (`:host`: alpha and beta are host values; `:device`: they are in
device memory), the primary context current and the slot's lock held
(`tf_cublas_enqueue`); return what `f` returns.  The handle is made at the
slot's first call (cuBLAS is loaded then) and kept until the runtime is torn
down.  A `CublasError` leaving `f` becomes the library's `TenferroError`
with `TF_ERROR_PROVIDER`; any other exception is rethrown as it is (the
same object, its original backtrace kept on the exception stack), after
the library released the slot and restored the context.  `f` must not
yield.
"""
function cublas_enqueue(f, rt::RuntimeHandle, mode::Symbol=:host)
    m = mode === :host ? L.TF_CUBLAS_POINTER_MODE_HOST :
        mode === :device ? L.TF_CUBLAS_POINTER_MODE_DEVICE :
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, "tf_cublas_enqueue",
                            "pointer mode $mode is neither :host nor :device"))
    trampoline = @cfunction(_cublas_trampoline, Int32, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}))
    _invoke(rt, "tf_cublas_enqueue", Callback(f, m)) do p, data
        L.tf_cublas_enqueue(p, m, trampoline, data)
    end
end

"""
    cublas_symbol(name) -> Ptr{Cvoid}

The address of a function of the cuBLAS the library loaded
(`tf_cublas_symbol`), to `ccall` with the handle `cublas_enqueue` gives.
"""
function cublas_symbol(name::AbstractString)
    _need_library("tf_cublas_symbol")
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(L.tf_cublas_symbol(name, out))
    return out[]
end

"Version of the loaded cuBLAS as major*10000 + minor*100 + patch (`tf_cublas_version`)."
function cublas_version()
    _need_library("tf_cublas_version")
    out = Ref{Int32}(0)
    check(L.tf_cublas_version(out))
    return Int(out[])
end

# Addresses found once; a failure is not kept, so a later call asks again.
const _SGEMM = Ref{Ptr{Cvoid}}(C_NULL)
const _DGEMM = Ref{Ptr{Cvoid}}(C_NULL)

function _symbol(cache, name)
    cache[] == C_NULL && (cache[] = cublas_symbol(name))
    return cache[]
end

_operation(t::Char) = t == 'N' ? Int32(0) : t == 'T' ? Int32(1) : t == 'C' ? Int32(2) :
    throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, "cublas", "operation '$t' is not 'N', 'T' or 'C'"))

_devptr(::Type{T}, x::DevicePtr) where {T} = Ptr{T}(UInt(x.addr))
_devptr(::Type{T}, x::DeviceBuffer) where {T} = Ptr{T}(UInt(pointer(x).addr))

# alpha and beta: host values need host pointer mode, device addresses
# device pointer mode.  Returns a pointer and what must stay alive.
function _scalar(::Type{T}, c::CublasCall, op, v::Real) where {T}
    c.mode == L.TF_CUBLAS_POINTER_MODE_HOST ||
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op,
                            "alpha and beta are host values, but the pointer mode is :device"))
    r = Ref{T}(T(v))
    return r
end

function _scalar(::Type{T}, c::CublasCall, op, v::DevicePtr) where {T}
    c.mode == L.TF_CUBLAS_POINTER_MODE_DEVICE ||
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op,
                            "alpha and beta are device addresses, but the pointer mode is :host"))
    return _devptr(T, v)
end

_scalar_ptr(::Type{T}, r::Base.RefValue) where {T} = Base.unsafe_convert(Ptr{T}, r)
_scalar_ptr(::Type{T}, p::Ptr) where {T} = p

# One GEMM of element type T through `gemm`, the LibTenferro wrapper of
# the cuBLAS function at `fn`.
function _gemm(gemm, cache, name, ::Type{T}, c::CublasCall, transa, transb, m, n, k,
               alpha, A, lda, B, ldb, beta, C, ldc) where {T}
    c.valid || throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, name,
                                   "the CublasCall was used after its cublas_enqueue returned"))
    al, be = _scalar(T, c, name, alpha), _scalar(T, c, name, beta)
    ints = map(a -> int32_arg(name, a[1], a[2]),
               (("m", m), ("n", n), ("k", k), ("lda", lda), ("ldb", ldb), ("ldc", ldc)))
    fn = _symbol(cache, name)
    status = GC.@preserve al be gemm(fn, c.handle, _operation(transa), _operation(transb),
                                     ints[1], ints[2], ints[3], _scalar_ptr(T, al), _devptr(T, A),
                                     ints[4], _devptr(T, B), ints[5], _scalar_ptr(T, be),
                                     _devptr(T, C), ints[6])
    status == 0 || throw(CublasError(status))
    return nothing
end

"""
    sgemm!(c::CublasCall, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)

Queue C = alpha*op(A)*op(B) + beta*C in single precision on `c`'s handle
(cublasSgemm_v2 of the library's cuBLAS).  `transa`, `transb` are 'N', 'T'
or 'C'; `A`, `B`, `C` are `DeviceBuffer{Float32}`s or `DevicePtr`s of
column-major matrices; `alpha`, `beta` are numbers (pointer mode `:host`) or
`DevicePtr`s (`:device`).  Throws `CublasError` when cuBLAS refuses.
"""
sgemm!(c::CublasCall, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) =
    _gemm(L.cublasSgemm_v2, _SGEMM, "cublasSgemm_v2", Float32, c, transa, transb, m, n, k,
          alpha, A, lda, B, ldb, beta, C, ldc)

"""
    dgemm!(c::CublasCall, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)

[`sgemm!`](@ref) in double precision (cublasDgemm_v2).
"""
dgemm!(c::CublasCall, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) =
    _gemm(L.cublasDgemm_v2, _DGEMM, "cublasDgemm_v2", Float64, c, transa, transb, m, n, k,
          alpha, A, lda, B, ldb, beta, C, ldc)
