# SPDX-License-Identifier: MIT OR Apache-2.0
# What a failed synchronous copy leaves behind.
#
# tf_download and tf_upload copy straight to or from page-locked memory,
# then wait for the stream.  When that wait fails the copy may still be
# queued, and the header says: keep the host memory until a later
# tf_runtime_sync of the slot succeeds, or leak it.  So, right after the
# failing ccall (a bound handle's slot, whatever thread the task is on), the
# binding tells the runtime's pool that the slot's stream uses the memory
# (tf_host_record_use): tf_host_free then parks the block until that stream
# has passed the copy, and tf_host_unregister waits for it.
#
# When the pool cannot be told (the runtime saw a device fault; the memory
# is another runtime's block or range), the host_alloc block or
# Registration the memory lies in gets a hold: a reference to the failed
# call's bound handle.  Freeing the block or unregistering the range first
# synchronizes that slot, the wait the pool would have made; if the wait
# fails, the block is leaked and the range stays registered.

# Throws the error of a synchronous copy between the device and host memory
# `host` through the bound handle p unless `status` is TF_OK (call it right
# after the copy, as check), first making sure the memory is kept while
# the device may still use it.
@inline _check_copy(status::Int32, p, host) = status == L.TF_OK || _copy_failed(status, p, host)

@noinline function _copy_failed(status::Int32, p::Ptr{L.tf_runtime}, host::Ptr)
    err = _last_error(status) # first: no other call may replace the record
    status == L.TF_ERROR_INVALID_ARGUMENT || _note_failed_copy(p, Ptr{Cvoid}(host))
    throw(err)
end

function _note_failed_copy(p::Ptr{L.tf_runtime}, host::Ptr{Cvoid})
    _has_function("tf_host_record_use") && L.tf_host_record_use(p, host) == L.TF_OK && return nothing
    r = _range_holding(UInt(host))
    r === nothing && return nothing # Julia memory: the library never touches it after the call
    hold = L.tf_runtime_retain(p) == L.TF_OK ? p : Ptr{L.tf_runtime}(C_NULL)
    _locked(() -> push!(r.holds, hold))
    return nothing
end

# r's holds, which it then has none of.
_take_holds(r::_HostRange) = _locked() do
    taken = copy(r.holds)
    empty!(r.holds)
    return taken
end

# Waits for the streams that hold r (tf_runtime_sync, the plain blocking
# call: finalizers run this) and drops the holds that waited.  Returns the
# first failure as a TenferroError, whose hold stays, or nothing.
function _settle(r::_HostRange)
    holds = _take_holds(r)
    kept = Ptr{L.tf_runtime}[]
    err = nothing
    for h in holds
        status = h == C_NULL ? L.TF_ERROR_RUNTIME_STATE : L.tf_runtime_sync(h)
        if status == L.TF_OK
            L.tf_runtime_release(h)
            continue
        end
        if err === nothing
            err = h == C_NULL ?
                binding_error(status, "tf_runtime_sync", "no reference to the slot of the failed copy could be made") :
                _last_error(status)
        end
        push!(kept, h)
    end
    _locked(() -> append!(r.holds, kept))
    return err
end

# op's error for memory a failed copy's stream may still use: `outcome`
# says what became of the memory, `cause` (whose status it takes) why
# waiting for that stream failed.
_held_error(op, outcome, cause::TenferroError) =
    TenferroError(cause.status, cause.code_domain, cause.code, op, cause.call,
                  "$op: $outcome: a failed copy's stream may still use it, and waiting for it failed: " *
                  cause.message)

# The memory is leaked for good: the holds' references go.
function _drop_holds(r::_HostRange)
    for h in _take_holds(r)
        h == C_NULL || L.tf_runtime_release(h)
    end
    return nothing
end
