# Runtimes: one Julia object per reference to a C tf_runtime.

"""
    Runtime(ordinal = 0; stream_slots, cublas_workspace_bytes, retirement_capacity)

A reference to a tenferro-gpu runtime on device `ordinal` (`tf_runtime_new`,
or `tf_runtime_new_with_options` when an option is given; the defaults are
the library's).  Methods may be called from any task and thread; `close`
may race with them safely: the reference is released when the last call in
flight returns.  A finalizer releases a Runtime that was never closed, but
teardown waits for the runtime's streams, so prefer `close`.
"""
mutable struct Runtime
    ptr::Ptr{L.tf_runtime} # never reassigned
    # 2 * calls in flight + 1 once closed.  Once closed, the count only goes
    # down, so exactly one party sees it reach 1 and releases the reference.
    @atomic state::Int

    function Runtime(ptr::Ptr{L.tf_runtime})
        rt = new(ptr, 0)
        finalizer(_finalize, rt)
        return rt
    end
end

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

function _options(op; stream_slots=nothing, cublas_workspace_bytes=nothing,
                  retirement_capacity=nothing)
    r = Ref{L.tf_runtime_options}()
    L.tf_runtime_options_init(r)
    d = r[]
    field(name, v, T) = v === nothing ? getfield(d, name) :
        (v isa Integer && typemin(T) <= v <= typemax(T)) ? T(v) :
        throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "$name $v does not fit in $T"))
    return Ref(L.tf_runtime_options(d.struct_size,
                                     field(:stream_slots, stream_slots, UInt32),
                                     field(:cublas_workspace_bytes, cublas_workspace_bytes, UInt64),
                                     field(:retirement_capacity, retirement_capacity, UInt32),
                                     d.flags))
end

function _acquire(rt::Runtime, op)
    while true
        s = @atomic rt.state
        isodd(s) && throw(binding_error(L.TF_ERROR_INVALID_HANDLE, op, "the Runtime was closed"))
        (@atomicreplace rt.state s => s + 2).success && return rt.ptr
    end
end

function _release(rt::Runtime)
    if modifyfield!(rt, :state, -, 2, :sequentially_consistent).second == 1
        L.tf_runtime_release(rt.ptr)
    end
    return nothing
end

# Runs f(ptr) with the C pointer held for the duration of the call.
function _with_ptr(f, rt::Runtime, op)
    p = _acquire(rt, op)
    try
        return f(p)
    finally
        _release(rt)
    end
end

"""
    close(rt::Runtime)

Release this reference (`tf_runtime_release`).  The last reference tears the
runtime down on the calling thread: it waits for the runtime's streams, then
frees what the runtime made; teardown problems go to the log.  Closing twice
throws a `TenferroError` with `TF_ERROR_INVALID_HANDLE`; it never releases
twice.
"""
function Base.close(rt::Runtime)
    while true
        s = @atomic rt.state
        isodd(s) && throw(binding_error(L.TF_ERROR_INVALID_HANDLE, "tf_runtime_release",
                                        "the Runtime was already closed"))
        if (@atomicreplace rt.state s => s | 1).success
            s == 0 && check(L.tf_runtime_release(rt.ptr))
            return nothing
        end
    end
end

Base.isopen(rt::Runtime) = iseven(@atomic rt.state)

# A finalizer must not throw or yield: tf_runtime_release does neither.
function _finalize(rt::Runtime)
    if isopen(rt)
        try
            close(rt)
        catch
            # A finalizer has nobody to tell; teardown problems were logged.
        end
    end
    return nothing
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

A reference to the same runtime whose calls always use stream slot `slot`
(0-based), from whatever thread the task runs on (`tf_runtime_bind_slot`).
Use it to give a task a stable stream: Julia tasks may migrate between
threads, and an unbound runtime's slot follows the thread.
"""
function bind_slot(rt::Runtime, slot::Integer)
    s = int32_arg("tf_runtime_bind_slot", "slot", slot)
    _with_ptr(rt, "tf_runtime_bind_slot") do p
        out = Ref{Ptr{L.tf_runtime}}(C_NULL)
        check(L.tf_runtime_bind_slot(p, s, out))
        return Runtime(out[])
    end
end

# One query that writes a value of type T through an out pointer.
function _query(f, rt::Runtime, op, ::Type{T}) where {T}
    _with_ptr(rt, op) do p
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
