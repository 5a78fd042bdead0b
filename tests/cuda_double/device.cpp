// SPDX-License-Identifier: MIT OR Apache-2.0
// Initialisation and device queries.  Devices look like a compute
// capability 9.0 part with 132 multiprocessors and 80 GiB (not backed).
#include <cstdio>
#include <cstring>

#include "entries.h"
#include "state.h"

namespace tfd {

bool valid_device(int device)
{
    return device >= 0 && device < state().device_count;
}

// Defaults of the attributes a library is likely to ask about; all others
// read 0 unless overridden with tfd_set_attribute.
static int default_attribute(int device, int attribute)
{
    switch (attribute) {
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
        case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
        case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
        case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
        case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
        case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
        case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
        case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
        case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
        case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
        case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
        case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
        case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
        case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
        case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
        case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x18 + device;
        case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
        case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
        case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
        case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
        case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
        case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
        case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
        case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
        case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
        case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
        case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
        case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return kMaxSharedOptin;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
        case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
        // Stream memory operations (cuStreamWriteValue32), as on an H200;
        // 0 makes them answer CUDA_ERROR_NOT_SUPPORTED (copy.cpp).
        case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1: return 1;
        default: return 0;
    }
}

int device_attribute(int device, int attribute)
{
    State &s = state();
    const auto &own = s.devices[device].attributes;
    auto it = own.find(attribute);
    if (it != own.end())
        return it->second;
    auto all = s.all_attributes.find(attribute);
    if (all != s.all_attributes.end())
        return all->second;
    return default_attribute(device, attribute);
}

// Common prologue of the device queries: initialized and a valid ordinal.
static CUresult need_device(CUdevice dev)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    return valid_device(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult entry::d_cuInit(unsigned int flags)
{
    return run("cuInit", [&] {
        if (flags != 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (state().device_count == 0)
            return CUDA_ERROR_NO_DEVICE;
        state().initialized = true;
        return CUDA_SUCCESS;
    });
}

CUresult entry::d_cuDriverGetVersion(int *version)
{
    return run("cuDriverGetVersion", [&] {
        if (version == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
        *version = state().driver_version;
        return CUDA_SUCCESS;
    });
}

CUresult entry::d_cuDeviceGet(CUdevice *device, int ordinal)
{
    return run("cuDeviceGet", [&] {
        CUresult rc = need_init();
        if (rc != CUDA_SUCCESS)
            return rc;
        if (device == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
        if (!valid_device(ordinal))
            return CUDA_ERROR_INVALID_DEVICE;
        *device = ordinal;
        return CUDA_SUCCESS;
    });
}

CUresult entry::d_cuDeviceGetCount(int *count)
{
    return run("cuDeviceGetCount", [&] {
        CUresult rc = need_init();
        if (rc != CUDA_SUCCESS)
            return rc;
        if (count == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
        *count = state().device_count;
        return CUDA_SUCCESS;
    });
}

CUresult entry::d_cuDeviceGetName(char *name, int len, CUdevice dev)
{
    return run("cuDeviceGetName", [&] {
        CUresult rc = need_device(dev);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (name == nullptr || len <= 0)
            return CUDA_ERROR_INVALID_VALUE;
        std::snprintf(name, static_cast<size_t>(len), "tenferro double device %d", dev);
        return CUDA_SUCCESS;
    });
}

CUresult entry::d_cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return run("cuDeviceGetUuid", [&] {
        CUresult rc = need_device(dev);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (uuid == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
        // "tfd-double-dev" followed by the ordinal: stable and distinct.
        static const char prefix[14] = {'t', 'f', 'd', '-', 'd', 'o', 'u',
                                        'b', 'l', 'e', '-', 'd', 'e', 'v'};
        std::memcpy(uuid->bytes, prefix, sizeof prefix);
        uuid->bytes[14] = 0;
        uuid->bytes[15] = static_cast<char>(dev);
        return CUDA_SUCCESS;
    });
}

CUresult entry::d_cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    return run("cuDeviceTotalMem", [&] {
        CUresult rc = need_device(dev);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (bytes == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
        *bytes = state().devices[dev].total_mem;
        return CUDA_SUCCESS;
    });
}

CUresult entry::d_cuDeviceGetAttribute(int *value, CUdevice_attribute attribute, CUdevice dev)
{
    return run("cuDeviceGetAttribute", [&] {
        CUresult rc = need_device(dev);
        if (rc != CUDA_SUCCESS)
            return rc;
        int a = raw_enum(attribute);
        if (value == nullptr || a < 1 || a >= CU_DEVICE_ATTRIBUTE_MAX)
            return CUDA_ERROR_INVALID_VALUE;
        *value = device_attribute(dev, a);
        return CUDA_SUCCESS;
    });
}

CUresult entry::d_cuDeviceCanAccessPeer(int *can_access, CUdevice dev, CUdevice peer)
{
    return run("cuDeviceCanAccessPeer", [&] {
        CUresult rc = need_device(dev);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (!valid_device(peer))
            return CUDA_ERROR_INVALID_DEVICE;
        if (can_access == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
        *can_access = dev != peer && state().devices[dev].peer[peer] ? 1 : 0;
        return CUDA_SUCCESS;
    });
}

}  // namespace tfd
