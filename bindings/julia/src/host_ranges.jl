# SPDX-License-Identifier: MIT OR Apache-2.0
# The live host_alloc blocks, by address: what free(A) looks up.

# The memory of one live host_alloc block.
mutable struct _HostRange
    start::UInt
    stop::UInt
    block::Any # the HostBuffer
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
    r = _HostRange(UInt(ptr), UInt(ptr) + UInt(nbytes), block)
    _locked(() -> push!(_HOST_RANGES, r))
    return r
end

_untrack(r::_HostRange) = (_locked(() -> delete!(_HOST_RANGES, r)); nothing)

# The live range that holds address p, or nothing.  It scans: only free(A)
# asks.
_range_holding(p::UInt) = _locked() do
    for r in _HOST_RANGES
        r.start <= p < r.stop && return r
    end
    return nothing
end
