# SPDX-License-Identifier: MIT OR Apache-2.0
# The device's memory pool behind alloc and DeviceBuffer (docs/memory.md):
# its counters, peak reset, trim, and uses of a buffer on another stream.
# New in 1.2: on an older library each call throws a TenferroError with
# TF_ERROR_NOT_SUPPORTED (_need_function).

"""
    MemoryStats

A consistent snapshot of the counters of a device's memory pool
(`tf_memory_pool_stats`, from [`memory_stats`](@ref)), shared by every
runtime of the device, like `torch.cuda.memory_stats()`.  Every snapshot has
`in_use_bytes <= reserved_bytes <= reserved_peak`, `in_use_bytes <=
in_use_peak`, and `allocations - frees` live allocations whose sizes add up
to `in_use_bytes`.  `cached` is `false` where the device has no memory pools
(`cuMemAlloc`, uncached) and before the device's first allocation.
"""
struct MemoryStats
    cached::Bool
    reserved_bytes::UInt64    # device memory the pool holds (uncached: in use)
    reserved_peak::UInt64     # most reserved since the pool was made or the last reset
    in_use_bytes::UInt64      # live allocations, in the bytes asked for
    in_use_peak::UInt64
    allocations::UInt64       # allocations made
    frees::UInt64             # frees of those
    oom_retries::UInt64       # allocations retried after the pool gave its cached memory back
    oom_failures::UInt64      # retries that failed anyway (TF_ERROR_OUT_OF_MEMORY)
    trims::UInt64             # give-backs: trim_memory and retries
    release_threshold::UInt64 # the pool's memory_release_threshold
    reserved_limit::UInt64    # the pool's memory_reserved_limit, 0 for none
end

"""
    memory_stats(x::Stream or Runtime) -> MemoryStats

The counters of the memory pool of the runtime's device (`tf_memory_stats`),
the same through every runtime of the device.  Waits only for allocations
and frees in progress, never for the device.
"""
function memory_stats(x::RuntimeHandle)
    s = _read_stats(x, "tf_memory_stats", L.tf_memory_stats, "tf_memory_pool_stats_init",
                    L.tf_memory_pool_stats_init, L.tf_memory_pool_stats)
    return MemoryStats(s.cached != 0, s.reserved_bytes, s.reserved_peak, s.in_use_bytes, s.in_use_peak,
                       s.allocations, s.frees, s.oom_retries, s.oom_failures, s.trims,
                       s.release_threshold, s.reserved_limit)
end

# A versioned stats struct of C type T, from its init (init_op, newer than
# 1.0 like the query) and the query (op, `read(p, out)`).
function _read_stats(x::RuntimeHandle, op, read, init_op, init, ::Type{T}) where {T}
    _need_function(op)
    _need_function(init_op)
    _with_ptr(x, op) do p
        out = Ref{T}()
        init(out)
        check(read(p, out))
        return out[]
    end
end

"""
    reset_peak_memory_stats(x::Stream or Runtime)

Restart the peaks of [`memory_stats`](@ref) (`reserved_peak`, `in_use_peak`)
at the current values (`tf_memory_reset_peak`), like
`torch.cuda.reset_peak_memory_stats()`.
"""
reset_peak_memory_stats(x::RuntimeHandle) = _call_optional(L.tf_memory_reset_peak, x, "tf_memory_reset_peak")

# One call `f(p)` of a function newer than 1.0 on x's pointer, checked.
function _call_optional(f, x::RuntimeHandle, op)
    _need_function(op)
    _with_ptr(p -> check(f(p)), x, op)
    return nothing
end

@static if GC_SAFE_CCALL
    _trim_c(p, keep, safe::Bool) = safe ? L.tf_memory_trim_gc_safe(p, keep) : L.tf_memory_trim(p, keep)
else
    _trim_c(p, keep, ::Bool) = L.tf_memory_trim(p, keep)
end

"""
    trim_memory(x::Stream or Runtime, keep_bytes = 0)

Give the unused memory of the device's pool back to the driver until it
holds at most `keep_bytes` of it (`tf_memory_trim`, `cuMemPoolTrimTo`), like
`torch.cuda.empty_cache()`; memory in use stays.  First waits for the work
queued on every slot of every runtime of the device, so that their frees
count: under [`TenferroGPU.wait_mode`](@ref) `:gc_safe` other threads'
garbage collections proceed meanwhile, otherwise the call blocks (there is
no one event to poll for every slot).  Uncached there is nothing to give
back.
"""
function trim_memory(x::RuntimeHandle, keep_bytes::Integer=0)
    op = "tf_memory_trim"
    _need_function(op)
    keep_bytes >= 0 || throw(binding_error(L.TF_ERROR_INVALID_ARGUMENT, op, "keep_bytes $keep_bytes is negative"))
    _with_ptr(p -> check(_trim_c(p, UInt64(keep_bytes), _gc_safe())), x, op)
    return nothing
end

"""
    record_use(x::Stream or Runtime, b::DeviceBuffer)
    record_use(x::Stream or Runtime, p::DevicePtr)

Note that work queued on the stream (`x`, or the calling task's stream of
the `Runtime` `x`) uses the buffer (the allocation holding `p`), so that
its `free`, in order on its own stream, waits on the device for the work
the stream queued before the free (`tf_memory_record_use`, like PyTorch's
`Tensor.record_stream()`).  Call it after queueing the work; once per stream
is enough.  `launch_kernel` and `copyto!` record their buffer operands of
other streams themselves; work queued by hand (raw `DevicePtr`s,
`cublas_enqueue` and `stream_enqueue` bodies) needs this.  An empty buffer
has nothing to record; a `p` outside every live allocation of the device
throws `TF_ERROR_INVALID_ARGUMENT`.
"""
function record_use(x::RuntimeHandle, ptr::DevicePtr)
    op = "tf_memory_record_use"
    _need_function(op)
    _with_stream((_, p) -> check(L.tf_memory_record_use(p, ptr.addr)), x, op)
    return nothing
end

record_use(x::RuntimeHandle, b::DeviceBuffer) = b.ptr.addr == 0 ? nothing : record_use(x, b.ptr)

# The stream b is freed on, when known here: its own Stream, or the calling
# task's stream of its Runtime (nothing when this task has none yet).
function _own_stream(b::DeviceBuffer)
    b.rt isa Stream && return b.rt
    streams = get(task_local_storage(), _TLS_STREAMS, nothing)
    streams === nothing && return nothing
    return get(streams, b.rt.identity, nothing)
end

# After work was queued on s (its pointer p held) with these operands:
# records each buffer freed on another stream, or on one unknown here.  The
# library itself skips a record on the freeing stream's own slot; a 1.1
# library records nothing.
function _record_operands(s::Stream, p::Ptr{L.tf_runtime}, operands)
    _has_function("tf_memory_record_use") || return nothing
    for b in operands
        (b isa DeviceBuffer && b.ptr.addr != 0 && _own_stream(b) !== s) || continue
        check(L.tf_memory_record_use(p, b.ptr.addr))
    end
    return nothing
end
