# SPDX-License-Identifier: MIT OR Apache-2.0
# Modules, kernels and NVRTC.

"""
    KernelModule(x::Runtime or Stream, image)

A reference to a module image loaded into the runtime's primary context
(`tf_module_load`): PTX text (a `String` or bytes; no NUL needed), a CUBIN
or a fatbin (`Vector{UInt8}`).  It keeps its runtime alive until its last
reference is released (`close`, or a finalizer).
"""
mutable struct KernelModule <: TenferroHandle
    ptr::Ptr{L.tf_module}
    @atomic state::Int

    KernelModule(ptr::Ptr{L.tf_module}) = _finalized(new(ptr, 0))
end

_kind(::KernelModule) = "KernelModule"
_release_op(::KernelModule) = "tf_module_release"
_release_c(m::KernelModule) = L.tf_module_release(m.ptr)

function KernelModule(rt::RuntimeHandle, image::Vector{UInt8})
    _with_ptr(rt, "tf_module_load") do p
        out = Ref{Ptr{L.tf_module}}(C_NULL)
        check(L.tf_module_load(p, image, length(image), out))
        return KernelModule(out[])
    end
end

KernelModule(rt::RuntimeHandle, ptx::AbstractString) = KernelModule(rt, Vector{UInt8}(codeunits(ptx)))

"A new reference to the same module (`tf_module_retain`)."
function retain(m::KernelModule)
    _with_ptr(m, "tf_module_retain") do p
        check(L.tf_module_retain(p))
        return KernelModule(p)
    end
end

"""
    KernelFunction(m::KernelModule, name)

A kernel of `m` by its name in the image: the plain name of an `extern "C"`
kernel, the mangled one of a C++ kernel (`tf_module_function`).  It refers
to `m`: after `close(m)` launching it throws `TF_ERROR_INVALID_HANDLE`.
"""
struct KernelFunction
    mod::KernelModule
    ptr::Ptr{Cvoid}
    name::String
end

function KernelFunction(m::KernelModule, name::AbstractString)
    fn = _query((p, out) -> L.tf_module_function(p, name, out), m, "tf_module_function", Ptr{Cvoid})
    return KernelFunction(m, fn, String(name))
end

"Set a `CUfunction_attribute` of the kernel (`tf_function_set_attribute`)."
function set_attribute!(f::KernelFunction, attribute::Integer, value::Integer)
    op = "tf_function_set_attribute"
    a, v = int32_arg(op, "attribute", attribute), int32_arg(op, "value", value)
    _with_ptr(p -> check(L.tf_function_set_attribute(p, f.ptr, a, v)), f.mod, op)
    return nothing
end

"CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, needed before launching with more than 48 KiB of dynamic shared memory."
const FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

_dims(x::Integer) = (x, 1, 1)
_dims(x::Tuple) = ntuple(i -> i <= length(x) ? x[i] : 1, 3)

function _launch_config(op, grid, block, shmem)
    g, b = _dims(grid), _dims(block)
    for v in (g..., b..., shmem)
        0 <= v <= typemax(UInt32) ||
            throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "launch dimension $v does not fit in uint32_t"))
    end
    r = Ref{L.tf_launch_config}()
    L.tf_launch_config_init(r)
    return Ref(L.tf_launch_config(r[].struct_size, g..., b..., shmem))
end

_kernel_arg(x::DeviceBuffer) = pointer(x)
_kernel_arg(x) = isbits(x) ? x :
    throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, "tf_kernel_launch",
                        "kernel argument of type $(typeof(x)) is not a bits value"))

"""
    launch_kernel(x::Stream or Runtime, f::KernelFunction, args...; grid=1, block=1, shmem=0)

Queue `f` on the stream (`x`, or the calling task's stream of the `Runtime`
`x`; `tf_kernel_launch`) and return once it is queued; faults the kernel
meets show up in later calls.  `grid` and
`block` are an integer or a tuple of up to 3; `args` are the kernel's
parameters, each a bits value of the parameter's exact C type
(`UInt32(n)` for an `unsigned`, a `DevicePtr` or `DeviceBuffer` for a
pointer).  Once the kernel is queued, each `DeviceBuffer` argument freed on
another stream has its use recorded ([`record_use`](@ref)), so that its
`free` waits for the kernel on the device (an error of that record is thrown
with the kernel queued).  It takes no slot lock: allowed inside
`stream_enqueue` and `cublas_enqueue` bodies.
"""
function launch_kernel(rt::RuntimeHandle, f::KernelFunction, args...; grid=1, block=1, shmem=0)
    op = "tf_kernel_launch"
    config = _launch_config(op, grid, block, shmem)
    values = map(a -> Ref(_kernel_arg(a)), args)
    argv = Ptr{Cvoid}[Base.unsafe_convert(Ptr{Cvoid}, r) for r in values]
    _with_stream(rt, op) do s, p
        _with_ptr(f.mod, op) do _
            GC.@preserve values argv check(L.tf_kernel_launch(p, f.ptr, config,
                                                               isempty(argv) ? C_NULL : pointer(argv)))
        end
        _record_operands(s, p, args)
    end
    return nothing
end

"""
    Program

The result of [`compile`](@ref): the compiled image ([`image`](@ref)) and
NVRTC's log ([`program_log`](@ref)) (`tf_program`).  One reference:
[`retain`](@ref) (or `copy`) adds another, and the image and log stay
until the last is released by `close` or a finalizer.  `close` releases
with `tf_program_release_checked` and throws its error
(`TF_ERROR_INVALID_HANDLE` when the program was released behind the
binding's back; it is never released again); on a 1.0 library it uses
`tf_program_release`, which reports nothing.
"""
mutable struct Program <: TenferroHandle
    ptr::Ptr{L.tf_program}
    @atomic state::Int

    Program(ptr::Ptr{L.tf_program}) = _finalized(new(ptr, 0))
end

_kind(::Program) = "Program"
_release_op(::Program) = "tf_program_release_checked"
# Neither function throws or yields, as finalizers need.
function _release_c(p::Program)
    _has_function("tf_program_release_checked") && return L.tf_program_release_checked(p.ptr)
    L.tf_program_release(p.ptr)
    return L.TF_OK
end

"""
    retain(prog::Program) -> Program

A new reference to the same program (`tf_program_retain`, new in 1.1:
throws `TF_ERROR_NOT_SUPPORTED` on a 1.0 library).  `copy(prog)` is the
same.
"""
function retain(prog::Program)
    op = "tf_program_retain"
    _need_function(op)
    _with_ptr(prog, op) do p
        check(L.tf_program_retain(p))
        return Program(p)
    end
end

Base.copy(prog::Program) = retain(prog)

"""
    compile(x::Runtime or Stream, source; target=:ptx, arch=0, options=String[], name="") -> Program

Compile CUDA C++ `source` with NVRTC for the runtime's device, or for
`arch` (10*major + minor), into PTX (`:ptx`) or a CUBIN (`:cubin`)
(`tf_program_compile`).  NVRTC is loaded at first use.  When NVRTC rejects
the source, the `TenferroError` (`TF_ERROR_COMPILE`) carries its whole log
in `log`.  Kernels to be found by their plain name must be `extern "C"`.
"""
function compile(rt::RuntimeHandle, source::AbstractString; target::Symbol=:ptx, arch::Integer=0,
                 options::AbstractVector{<:AbstractString}=String[], name::AbstractString="")
    op = "tf_program_compile"
    t = target === :ptx ? L.TF_COMPILE_PTX : target === :cubin ? L.TF_COMPILE_CUBIN :
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "target $target is neither :ptx nor :cubin"))
    strings = [String(s) for s in options]
    cname = String(name)
    argv = Ptr{UInt8}[pointer(s) for s in strings]
    r = Ref{L.tf_compile_options}()
    L.tf_compile_options_init(r)
    out = Ref{Ptr{L.tf_program}}(C_NULL)
    failure = GC.@preserve strings cname argv begin
        opts = Ref(L.tf_compile_options(r[].struct_size, t, int32_arg(op, "arch", arch),
                                        int32_arg(op, "option_count", length(argv)),
                                        isempty(argv) ? C_NULL : pointer(argv),
                                        isempty(cname) ? C_NULL : pointer(cname)))
        _with_ptr(rt, op) do p
            status = L.tf_program_compile(p, source, opts, out)
            status == L.TF_OK ? nothing : _last_error(status) # copied before anything allocates
        end
    end
    failure === nothing && return Program(out[])
    if failure.status == L.TF_ERROR_COMPILE && out[] != C_NULL
        prog = Program(out[])
        log = program_log(prog)
        close(prog)
        throw(TenferroError(failure.status, failure.code_domain, failure.code, failure.operation,
                            failure.call, failure.message, log))
    end
    throw(failure)
end

"A copy of the compiled image (PTX including its NUL byte, or a CUBIN) (`tf_program_image`)."
function image(prog::Program)
    _with_ptr(prog, "tf_program_image") do p
        img, n = Ref{Ptr{Cvoid}}(C_NULL), Ref{Csize_t}(0)
        check(L.tf_program_image(p, img, n))
        return copy(unsafe_wrap(Vector{UInt8}, Ptr{UInt8}(img[]), n[]))
    end
end

"NVRTC's log, \"\" when it wrote none (`tf_program_log`)."
program_log(prog::Program) = unsafe_string(_query(L.tf_program_log, prog, "tf_program_log", Ptr{UInt8}))
