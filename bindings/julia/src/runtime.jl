# SPDX-License-Identifier: MIT OR Apache-2.0
# Runtimes: one Julia object per reference to a C tf_runtime.

"""
    RuntimeHandle

A handle of a runtime: a [`Runtime`](@ref) or a [`Stream`](@ref).  Queries
about the runtime take either.  Work on a stream slot (transfers, cuBLAS,
kernels, events, retirement, [`sync_stream`](@ref)) runs on the `Stream`
given, or, given a `Runtime`, on the calling task's own stream of it
([`task_stream`](@ref)).
"""
abstract type RuntimeHandle <: TenferroHandle end

"""
    Runtime(ordinal = 0; stream_slots, cublas_workspace_bytes, retirement_capacity,
            download_threads, download_chunk_bytes, memory_release_threshold,
            memory_reserved_limit)
    Runtime(f, ordinal = 0; options...)

A reference to a tenferro-gpu runtime on device `ordinal` (`tf_runtime_new`,
or `tf_runtime_new_with_options` when an option is given; the defaults are
the library's).  Work given a `Runtime` runs on the calling task's own
[`Stream`](@ref) of it ([`task_stream`](@ref)), so a task's upload and the
download after it stay ordered although the task may change OS thread in
between.  Methods may be called from any task and thread; `close` may race
with them safely: the reference is released when the last call in flight
returns.  Closing the last `Runtime` of a runtime also closes the task
streams made for it.  A finalizer releases a Runtime that was never closed,
but teardown waits for the runtime's streams, so prefer `close`, or the
do-block form, which closes when `f(rt)` returns.

`memory_release_threshold` (unused bytes the device's memory pool keeps at
a synchronizing call; 0, the default, keeps all, 1 none) and
`memory_reserved_limit` (most memory the pool may hold; 0 none, else at
least `TF_MIN_MEMORY_RESERVED_LIMIT`, CUDA 12.2 or later) are the pool's,
which the runtimes of a device share (1.2): a nonzero value other than that
of the pool a live runtime of the device made throws
`TF_ERROR_INVALID_ARGUMENT`, naming both.
"""
mutable struct Runtime <: RuntimeHandle
    ptr::Ptr{L.tf_runtime} # never reassigned
    @atomic state::Int
    identity::UInt64       # tf_runtime_identity, the key of its task streams; never reassigned

    function Runtime(ptr::Ptr{L.tf_runtime})
        id = Ref{UInt64}(0)
        status = L.tf_runtime_identity(ptr, id)
        if status != L.TF_OK
            err = _last_error(status) # copied before another call can overwrite it
            L.tf_runtime_release(ptr)
            throw(err)
        end
        rt = _finalized(new(ptr, 0, id[]))
        _runtime_opened(rt)
        return rt
    end
end

_kind(::Runtime) = "Runtime"
_release_op(::Runtime) = "tf_runtime_release"
_release_c(rt::Runtime) = L.tf_runtime_release(rt.ptr)
_on_close(rt::Runtime) = _runtime_closed(rt)

function Runtime(ordinal::Integer=0; options...)
    op = isempty(options) ? "tf_runtime_new" : "tf_runtime_new_with_options"
    _need_library(op)
    o = int32_arg(op, "ordinal", ordinal)
    out = Ref{Ptr{L.tf_runtime}}(C_NULL)
    if isempty(options)
        check(L.tf_runtime_new(o, out))
    else
        check(L.tf_runtime_new_with_options(o, _options(op; options...), out))
    end
    return Runtime(out[])
end

Runtime(f::Function, ordinal::Integer=0; options...) = _closing(f, Runtime(ordinal; options...))

const _OPTION_FIELDS = (:stream_slots, :cublas_workspace_bytes, :retirement_capacity,
                        :download_threads, :download_chunk_bytes,
                        :memory_release_threshold, :memory_reserved_limit)

# The library's defaults with the options given; a value that does not fit
# its field is refused before the call.
function _options(op; options...)
    for k in keys(options)
        k in _OPTION_FIELDS ||
            throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "unknown option $k"))
    end
    r = Ref{L.tf_runtime_options}()
    L.tf_runtime_options_init(r)
    d = r[]
    values = map(fieldnames(L.tf_runtime_options)) do name
        v = get(options, name, nothing)
        T = fieldtype(L.tf_runtime_options, name)
        v === nothing && return getfield(d, name)
        (v isa Integer && typemin(T) <= v <= typemax(T)) ||
            throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "$name $v does not fit in $T"))
        return T(v)
    end
    return Ref(L.tf_runtime_options(values...))
end

"A new reference to the same runtime (`tf_runtime_retain`), closed independently."
function retain(rt::Runtime)
    _with_ptr(rt, "tf_runtime_retain") do p
        check(L.tf_runtime_retain(p))
        return Runtime(p)
    end
end

# One query that writes a value of type T through an out pointer.
function _query(f, h::TenferroHandle, op, ::Type{T}) where {T}
    _with_ptr(h, op) do p
        out = Ref{T}()
        check(f(p, out))
        return out[]
    end
end

# The same, on the stream the call uses (the Stream, or the task's).
function _stream_query(f, x::RuntimeHandle, op, ::Type{T}) where {T}
    _with_stream(x, op) do _, p
        out = Ref{T}()
        check(f(p, out))
        return out[]
    end
end

"Fresh for every new runtime, equal across `retain` and its streams (`tf_runtime_identity`)."
runtime_identity(x::RuntimeHandle) = _query(L.tf_runtime_identity, x, "tf_runtime_identity", UInt64)

"The allocation domain of the runtime's device memory (`tf_runtime_allocation_domain`)."
allocation_domain(x::RuntimeHandle) =
    _query(L.tf_runtime_allocation_domain, x, "tf_runtime_allocation_domain", UInt64)

device_info(x::RuntimeHandle) = _with_ptr(x, "tf_runtime_device_info") do p
    _device_properties(out -> L.tf_runtime_device_info(p, out))
end

"Whether the runtime supports a `TF_CAP_*` capability (`tf_runtime_supports`)."
supports(x::RuntimeHandle, capability::Integer) =
    _query((p, out) -> L.tf_runtime_supports(p, Int32(capability), out), x,
           "tf_runtime_supports", Int32) != 0

"The device's primary context, a `CUcontext` (`tf_runtime_primary_context`)."
primary_context(x::RuntimeHandle) =
    _query(L.tf_runtime_primary_context, x, "tf_runtime_primary_context", Ptr{Cvoid})

"Number of stream slots (`tf_runtime_slot_count`)."
slot_count(x::RuntimeHandle) = Int(_query(L.tf_runtime_slot_count, x, "tf_runtime_slot_count", Int32))

"The slot the stream uses: the `Stream`'s, or the calling task's stream's (`tf_runtime_current_slot`)."
current_slot(x::RuntimeHandle) =
    Int(_stream_query(L.tf_runtime_current_slot, x, "tf_runtime_current_slot", Int32))

"""
    raw_stream(s::Stream or rt::Runtime) -> Ptr{Cvoid}

The `CUstream` of the stream's slot, created on first use
(`tf_runtime_stream`); for a `Runtime`, of the calling task's stream.
"""
raw_stream(x::RuntimeHandle) = _stream_query(L.tf_runtime_stream, x, "tf_runtime_stream", Ptr{Cvoid})

"The `CUstream` of slot `slot` (0-based; `tf_runtime_slot_stream`)."
function slot_stream(x::RuntimeHandle, slot::Integer)
    s = int32_arg("tf_runtime_slot_stream", "slot", slot)
    return _query((p, out) -> L.tf_runtime_slot_stream(p, s, out), x,
                  "tf_runtime_slot_stream", Ptr{Cvoid})
end

"""
    slot_wait(x, other_slot)

Make the stream's slot (`x` a `Stream`, or the calling task's stream of the
`Runtime` `x`) wait, on the device, for the work queued on slot
`other_slot` (0-based) before this call (`tf_slot_wait`); the host does not
wait.  It takes no slot lock: allowed inside `cublas_enqueue` and
`stream_enqueue` bodies.
"""
function slot_wait(x::RuntimeHandle, other_slot::Integer)
    s = int32_arg("tf_slot_wait", "other_slot", other_slot)
    _with_stream((_, p) -> check(L.tf_slot_wait(p, s)), x, "tf_slot_wait")
end
