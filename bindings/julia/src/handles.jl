# SPDX-License-Identifier: MIT OR Apache-2.0
# Reference-counted library objects (runtimes, events, modules, programs):
# one Julia object per reference, safe against `close` racing with calls.
#
# Every subtype is a mutable struct with the fields `ptr` (never
# reassigned, set by an inner constructor `X(ptr) = _finalized(new(ptr, 0))`)
# and `@atomic state::Int` = 2 * calls in flight + 1 once
# closed, and defines _kind, _release_op and _release_c (and may define
# _on_close, run once by the close that wins).  INVARIANT: once closed, the
# count only goes down, so exactly one party sees it reach 1 and releases
# the reference.
abstract type TenferroHandle end

function _acquire(h::TenferroHandle, op)
    while true
        s = @atomic h.state
        isodd(s) && throw(binding_error(L.TF_ERROR_INVALID_HANDLE, op, "the $(_kind(h)) was closed"))
        (@atomicreplace h.state s => s + 2).success && return h.ptr
    end
end

function _release(h::TenferroHandle)
    if modifyfield!(h, :state, -, 2, :sequentially_consistent).second == 1
        _release_c(h) # the closer already returned: nobody to report to
    end
    return nothing
end

# Runs f(ptr) with the C pointer held for the duration of the call.
function _with_ptr(f, h::TenferroHandle, op)
    p = _acquire(h, op)
    try
        return f(p)
    finally
        _release(h)
    end
end

"""
    close(h)

Release this reference of a `Runtime`, `Stream`, `Event`, `KernelModule`,
`KernelGraph` or `Program`.  Closing the last open `Runtime` of a runtime also closes the
task streams made for it ([`task_stream`](@ref)).  The last reference to a
runtime tears it down on the calling thread: it waits for the runtime's
streams, then frees what the runtime made; teardown problems go to the
log.  If a call on `h` is in flight on
another task, the release happens when it returns.  Closing twice throws a
`TenferroError` with `TF_ERROR_INVALID_HANDLE`; it never releases twice.
"""
function Base.close(h::TenferroHandle)
    while true
        s = @atomic h.state
        isodd(s) && throw(binding_error(L.TF_ERROR_INVALID_HANDLE, _release_op(h),
                                        "the $(_kind(h)) was already closed"))
        if (@atomicreplace h.state s => s | 1).success
            _on_close(h)
            s == 0 && check(_release_c(h))
            return nothing
        end
    end
end

# What else closing `h` ends (a Runtime: its task streams).  It must not
# throw or yield: close runs in finalizers.
_on_close(::TenferroHandle) = nothing

Base.isopen(h::TenferroHandle) = iseven(@atomic h.state)

# Every handle gets this finalizer when made (inner constructors call it).
_finalized(h::TenferroHandle) = (finalizer(_finalize, h); h)

# A finalizer must not throw or yield: the release functions do neither.
function _finalize(h::TenferroHandle)
    if isopen(h)
        try
            close(h)
        catch
            # A finalizer has nobody to tell; teardown problems were logged.
        end
    end
    return nothing
end

# do-block form of the constructors: close when f returns or throws.
function _closing(f, h::TenferroHandle)
    try
        return f(h)
    finally
        isopen(h) && close(h)
    end
end
