# Errors: every failing call throws a TenferroError built from a copy of the
# library's thread-local record.

"""
    TenferroError(status, code_domain, code, operation, call, message)

A failure of the library.  `status` is one of the `TF_ERROR_*` constants
(`TenferroGPU.LibTenferro`), `operation` the public C function that failed,
`call` the CUDA, cuBLAS or NVRTC call inside it ("" when the library itself
refused), `code` its numeric result (meaning given by `code_domain`, one of
`TF_CODE_*`), and `message` the library's full message.
"""
struct TenferroError <: Exception
    status::Int32
    code_domain::Int32
    code::Int32
    operation::String
    call::String
    message::String
end

Base.showerror(io::IO, e::TenferroError) =
    print(io, "TenferroError: ", e.message, " [", status_string(e.status), "]")

"The library's static description of a status (`tf_status_string`)."
status_string(status::Integer) = unsafe_string(L.tf_status_string(Int32(status)))

_cstring(bytes::NTuple) = String(collect(Iterators.takewhile(!iszero, bytes)))

# Throws the calling thread's last error unless `status` is TF_OK.
#
# Why this is right for Julia tasks: a task changes OS thread only at a yield
# point, and there is none between the failing ccall and this one
# (tf_last_error); finalizers that may run at an allocation here only call
# tf_runtime_release on live handles, which leaves the record alone.
@inline function check(status::Int32)
    status == L.TF_OK || throw_last_error(status)
    return nothing
end

@noinline function throw_last_error(status::Int32)
    info = Ref{L.tf_error_info}()
    L.tf_error_info_init(info)
    if L.tf_last_error(info) != L.TF_OK || info[].status != status
        throw(TenferroError(status, L.TF_CODE_NONE, 0, "", "",
                            status_string(status) * " (the library recorded no matching error)"))
    end
    e = info[]
    throw(TenferroError(e.status, e.code_domain, e.code, _cstring(e.operation),
                        _cstring(e.call), _cstring(e.message)))
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
