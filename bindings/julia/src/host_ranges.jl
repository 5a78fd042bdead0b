# SPDX-License-Identifier: MIT OR Apache-2.0
# The live host_alloc blocks and registered ranges, by address: what
# free(A) and a failed synchronous copy (failed_copy.jl) look up.

# The memory of one live host_alloc block or Registration.  The registry
# points at it, never at the Registration, so that a dropped Registration
# is still finalized.
mutable struct _HostRange
    start::UInt
    stop::UInt
    block::Any                      # the HostBuffer of a block; nothing for a range
    holds::Vector{Ptr{L.tf_runtime}} # failed copies' streams (failed_copy.jl)
end

# A spin lock: finalizers take it, and must not yield.
const _HOST_RANGES_LOCK = Threads.SpinLock()
const _HOST_RANGES = Set{_HostRange}()

function _locked(f)
    lock(_HOST_RANGES_LOCK)
    try
        return f()
    finally
        unlock(_HOST_RANGES_LOCK)
    end
end

function _track(ptr::Ptr, nbytes::Integer, block=nothing)
    r = _HostRange(UInt(ptr), UInt(ptr) + UInt(nbytes), block, Ptr{L.tf_runtime}[])
    _locked(() -> push!(_HOST_RANGES, r))
    return r
end

_untrack(r::_HostRange) = (_locked(() -> delete!(_HOST_RANGES, r)); nothing)

# The live range that holds address p, or nothing.  It scans: only free(A)
# and a failed copy ask.
_range_holding(p::UInt) = _locked() do
    for r in _HOST_RANGES
        r.start <= p < r.stop && return r
    end
    return nothing
end
