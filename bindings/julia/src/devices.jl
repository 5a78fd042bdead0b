# SPDX-License-Identifier: MIT OR Apache-2.0
# Devices.

"What the driver reports about one device (`tf_device_properties`)."
struct DeviceProperties
    ordinal::Int
    name::String
    uuid::Base.UUID
    compute_capability::VersionNumber
    total_memory_bytes::UInt64
    multiprocessor_count::Int
    pci_domain_id::Int
    pci_bus_id::Int
    pci_device_id::Int
end

function DeviceProperties(p::L.tf_device_properties)
    uuid = foldl((acc, b) -> (acc << 8) | UInt128(b), p.uuid; init=UInt128(0))
    return DeviceProperties(p.ordinal, _cstring(p.name), Base.UUID(uuid),
                            VersionNumber(p.compute_capability_major, p.compute_capability_minor),
                            p.total_memory_bytes, p.multiprocessor_count,
                            p.pci_domain_id, p.pci_bus_id, p.pci_device_id)
end

function _device_properties(query)
    out = Ref{L.tf_device_properties}()
    L.tf_device_properties_init(out)
    check(query(out))
    return DeviceProperties(out[])
end

"""
    gpu_available() -> Bool

Whether this process can use a CUDA device (`tf_gpu_available`): `false`
also when libtenferro_gpu.so.1 itself is missing
([`TenferroGPU.library_problem`](@ref) says why).  Never throws.
"""
gpu_available() = _LIBRARY_FOUND[] && L.tf_gpu_available() != 0

"Number of CUDA devices (`tf_device_count`); creates no context."
function device_count()
    _need_library("tf_device_count")
    n = Ref{Int32}(0)
    check(L.tf_device_count(n))
    return Int(n[])
end

"""
    device_info(ordinal::Integer) -> DeviceProperties
    device_info(rt::Runtime or s::Stream) -> DeviceProperties

Describe device `ordinal` (0-based; `tf_device_info`; creates no context),
or a runtime's device as read when it was created (`tf_runtime_device_info`).
"""
function device_info(ordinal::Integer)
    _need_library("tf_device_info")
    o = int32_arg("tf_device_info", "ordinal", ordinal)
    return _device_properties(out -> L.tf_device_info(o, out))
end
