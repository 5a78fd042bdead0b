# Runtimes: one Julia object per reference to a C tf_runtime.

"""
    Runtime(ordinal = 0; stream_slots, cublas_workspace_bytes, retirement_capacity,
            download_threads, download_chunk_bytes)
    Runtime(f, ordinal = 0; options...)

A reference to a tenferro-gpu runtime on device `ordinal` (`tf_runtime_new`,
or `tf_runtime_new_with_options` when an option is given; the defaults are
the library's).  Methods may be called from any task and thread; `close`
may race with them safely: the reference is released when the last call in
flight returns.  A finalizer releases a Runtime that was never closed, but
teardown waits for the runtime's streams, so prefer `close`, or the
do-block form, which closes when `f(rt)` returns.
"""
mutable struct Runtime <: TenferroHandle
    ptr::Ptr{L.tf_runtime} # never reassigned
    @atomic state::Int

    Runtime(ptr::Ptr{L.tf_runtime}) = _finalized(new(ptr, 0))
end

_kind(::Runtime) = "Runtime"
_release_op(::Runtime) = "tf_runtime_release"
_release_c(rt::Runtime) = L.tf_runtime_release(rt.ptr)

function Runtime(ordinal::Integer=0; options...)
    op = isempty(options) ? "tf_runtime_new" : "tf_runtime_new_with_options"
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
                        :download_threads, :download_chunk_bytes)

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

"""
    bind_slot(rt, slot) -> Runtime
    bind_slot(f, rt, slot)

A reference to the same runtime whose calls always use stream slot `slot`
(0-based), from whatever thread the task runs on (`tf_runtime_bind_slot`).
Use it to give a task a stable stream: Julia tasks may migrate between
threads, and an unbound runtime's slot follows the thread, so an upload and
the download after it could land on two streams, unordered.  The do-block
form closes the bound reference when `f` returns.
"""
function bind_slot(rt::Runtime, slot::Integer)
    s = int32_arg("tf_runtime_bind_slot", "slot", slot)
    _with_ptr(rt, "tf_runtime_bind_slot") do p
        out = Ref{Ptr{L.tf_runtime}}(C_NULL)
        check(L.tf_runtime_bind_slot(p, s, out))
        return Runtime(out[])
    end
end

bind_slot(f::Function, rt::Runtime, slot::Integer) = _closing(f, bind_slot(rt, slot))

# One query that writes a value of type T through an out pointer.
function _query(f, h::TenferroHandle, op, ::Type{T}) where {T}
    _with_ptr(h, op) do p
        out = Ref{T}()
        check(f(p, out))
        return out[]
    end
end

"Fresh for every new runtime, equal across `retain` and `bind_slot` (`tf_runtime_identity`)."
runtime_identity(rt::Runtime) = _query(L.tf_runtime_identity, rt, "tf_runtime_identity", UInt64)

"The allocation domain of the runtime's device memory (`tf_runtime_allocation_domain`)."
allocation_domain(rt::Runtime) =
    _query(L.tf_runtime_allocation_domain, rt, "tf_runtime_allocation_domain", UInt64)

"The runtime's device as read at creation (`tf_runtime_device_info`)."
device(rt::Runtime) = _with_ptr(rt, "tf_runtime_device_info") do p
    _device_properties(out -> L.tf_runtime_device_info(p, out))
end

"Whether the runtime supports a `TF_CAP_*` capability (`tf_runtime_supports`)."
supports(rt::Runtime, capability::Integer) =
    _query((p, out) -> L.tf_runtime_supports(p, Int32(capability), out), rt,
           "tf_runtime_supports", Int32) != 0

"The device's primary context, a `CUcontext` (`tf_runtime_primary_context`)."
primary_context(rt::Runtime) =
    _query(L.tf_runtime_primary_context, rt, "tf_runtime_primary_context", Ptr{Cvoid})

"Number of stream slots (`tf_runtime_slot_count`)."
slot_count(rt::Runtime) = Int(_query(L.tf_runtime_slot_count, rt, "tf_runtime_slot_count", Int32))

"The slot a call made now would use (`tf_runtime_current_slot`)."
current_slot(rt::Runtime) =
    Int(_query(L.tf_runtime_current_slot, rt, "tf_runtime_current_slot", Int32))

"The current slot's `CUstream`, created on first use (`tf_runtime_stream`)."
stream(rt::Runtime) = _query(L.tf_runtime_stream, rt, "tf_runtime_stream", Ptr{Cvoid})

"The `CUstream` of slot `slot` (0-based; `tf_runtime_slot_stream`)."
function slot_stream(rt::Runtime, slot::Integer)
    s = int32_arg("tf_runtime_slot_stream", "slot", slot)
    return _query((p, out) -> L.tf_runtime_slot_stream(p, s, out), rt,
                  "tf_runtime_slot_stream", Ptr{Cvoid})
end

"Wait for the current slot's queued work, then run due retirements (`tf_runtime_sync`)."
synchronize(rt::Runtime) = _with_ptr(p -> check(L.tf_runtime_sync(p)), rt, "tf_runtime_sync")

"""
    slot_wait(rt, other_slot)

Make the current slot's stream wait, on the device, for the work queued on
slot `other_slot` (0-based) before this call (`tf_slot_wait`); the host does
not wait.  It takes no slot lock: allowed inside `cublas_enqueue` and
`stream_enqueue` bodies.
"""
function slot_wait(rt::Runtime, other_slot::Integer)
    s = int32_arg("tf_slot_wait", "other_slot", other_slot)
    _with_ptr(p -> check(L.tf_slot_wait(p, s)), rt, "tf_slot_wait")
end
