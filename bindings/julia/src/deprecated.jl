# SPDX-License-Identifier: MIT OR Apache-2.0
# Names of earlier versions, no longer exported.  CUDA.jl exports
# `synchronize`, `stream`, `device` and `launch`: a program using both
# packages could use neither package's unqualified, so TenferroGPU exports
# other names for them.  These keep older code working when qualified
# (TenferroGPU.synchronize) and say what replaces them.

function synchronize(x::RuntimeHandle)
    Base.depwarn("TenferroGPU.synchronize(rt) is deprecated, use sync_stream(rt)", :synchronize)
    return sync_stream(x)
end

function synchronize(ev::Event)
    Base.depwarn("TenferroGPU.synchronize(event) is deprecated, use sync_event(event)", :synchronize)
    return sync_event(ev)
end

function stream(x::RuntimeHandle)
    Base.depwarn("TenferroGPU.stream(rt) is deprecated, use raw_stream(rt)", :stream)
    return raw_stream(x)
end

function device(x::RuntimeHandle)
    Base.depwarn("TenferroGPU.device(rt) is deprecated, use device_info(rt)", :device)
    return device_info(x)
end

function launch(x::RuntimeHandle, f::KernelFunction, args...; kwargs...)
    Base.depwarn("TenferroGPU.launch is deprecated, use launch_kernel", :launch)
    return launch_kernel(x, f, args...; kwargs...)
end

function bind_slot(x::RuntimeHandle, slot::Integer)
    Base.depwarn("TenferroGPU.bind_slot(rt, slot) is deprecated, use Stream(rt, slot)", :bind_slot)
    return Stream(x, slot)
end

function bind_slot(f::Function, x::RuntimeHandle, slot::Integer)
    Base.depwarn("TenferroGPU.bind_slot(f, rt, slot) is deprecated, use Stream(f, rt, slot)", :bind_slot)
    return Stream(f, x, slot)
end
