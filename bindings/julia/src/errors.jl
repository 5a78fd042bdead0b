# SPDX-License-Identifier: MIT OR Apache-2.0
# Errors: every failing call throws a TenferroError built from a copy of the
# library's thread-local record.

"""
    TenferroError(status, code_domain, code, operation, call, message[, log])

A failure of the library.  `status` is one of the `TF_ERROR_*` constants
(`TenferroGPU.LibTenferro`), `operation` the public C function that failed,
`call` the CUDA, cuBLAS or NVRTC call inside it ("" when the library itself
refused), `code` its numeric result (meaning given by `code_domain`, one of
`TF_CODE_*`), `message` the library's full message, and `log` NVRTC's whole
log for a `TF_ERROR_COMPILE` from [`compile`](@ref) ("" otherwise).
"""
struct TenferroError <: Exception
    status::Int32
    code_domain::Int32
    code::Int32
    operation::String
    call::String
    message::String
    log::String
end

TenferroError(status, code_domain, code, operation, call, message) =
    TenferroError(status, code_domain, code, operation, call, message, "")

Base.showerror(io::IO, e::TenferroError) =
    print(io, "TenferroError: ", e.message, " [", _status_name(e.status), "]")

# The library describes its statuses; without the library, the number.
_status_name(status) = _LIBRARY_FOUND[] ? status_string(status) : "status $status"

"The library's static description of a status (`tf_status_string`)."
status_string(status::Integer) =
    (_need_library("tf_status_string"); unsafe_string(L.tf_status_string(Int32(status))))

_cstring(bytes::NTuple) = String(collect(Iterators.takewhile(!iszero, bytes)))

# One error record per thread, made in __init__, so that copying a failure
# allocates nothing before tf_last_error has run (an allocation could run a
# finalizer that calls the library on this thread first).
const _ERROR_BUFFERS = Base.RefValue{L.tf_error_info}[]

function _init_error_buffers()
    empty!(_ERROR_BUFFERS)
    for _ in 1:Threads.maxthreadid()
        push!(_ERROR_BUFFERS, Ref{L.tf_error_info}())
    end
end

# Throws the calling thread's last error unless `status` is TF_OK.
#
# Why this is right for Julia tasks: a task changes OS thread only at a yield
# point, and there is none between the failing ccall and this one
# (tf_last_error), which also allocates nothing before it runs.
@inline function check(status::Int32)
    status == L.TF_OK || throw_last_error(status)
    return nothing
end

@noinline throw_last_error(status::Int32) = throw(_last_error(status))

# The calling thread's record of the failure that returned `status`, as a
# TenferroError.  Call it right after the failing ccall (see check).
@noinline function _last_error(status::Int32)
    tid = Threads.threadid()
    info = tid <= length(_ERROR_BUFFERS) ? _ERROR_BUFFERS[tid] : Ref{L.tf_error_info}()
    L.tf_error_info_init(info)
    if L.tf_last_error(info) != L.TF_OK || info[].status != status
        return TenferroError(status, L.TF_CODE_NONE, 0, "", "",
                             status_string(status) * " (the library recorded no matching error)")
    end
    e = info[]
    return TenferroError(e.status, e.code_domain, e.code, _cstring(e.operation),
                         _cstring(e.call), _cstring(e.message))
end

# An error this binding detects before calling the library, shaped like the
# library's own ("op: detail").
binding_error(status, op, detail) =
    TenferroError(status, L.TF_CODE_NONE, 0, op, "", string(op, ": ", detail))

function int32_arg(op, name, v::Integer)
    typemin(Int32) <= v <= typemax(Int32) ||
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "$name $v does not fit in int32_t"))
    return Int32(v)
end

function size_arg(op, name, v::Integer)
    v >= 0 || throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "$name $v is negative"))
    v <= typemax(Csize_t) ||
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "$name $v does not fit in size_t"))
    return Csize_t(v)
end
