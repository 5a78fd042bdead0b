// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/device_discovery.h"

#include <cstdio>
#include <cstring>

#include "driver/cuda_status.h"
#include "util/error.h"

namespace tf {
namespace {

tf_status attribute(const DriverApi &api, CUdevice device, CUdevice_attribute attr, int32_t *out) {
    int value = 0;
    tf_status st = TF_CU(api, cuDeviceGetAttribute, &value, attr, device);
    if (st == TF_OK) *out = value;
    return st;
}

std::string uuid_text(const uint8_t (&u)[16]) {
    char buf[48];
    std::snprintf(buf, sizeof buf,
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                  u[14], u[15]);
    return buf;
}

}  // namespace

tf_status count_devices(const DriverApi &api, int32_t *out) {
    int count = 0;
    tf_status st = TF_CU(api, cuDeviceGetCount, &count);
    if (st == TF_OK) *out = count;
    return st;
}

tf_status describe_device(const DriverApi &api, int32_t ordinal, CUdevice device,
                          tf_device_properties *out) {
    std::memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->ordinal = ordinal;
    tf_status st = TF_CU(api, cuDeviceGetName, out->name, TF_DEVICE_NAME_CAPACITY, device);
    if (st != TF_OK) return st;
    out->name[TF_DEVICE_NAME_CAPACITY - 1] = '\0';
    CUuuid uuid;
    if ((st = TF_CU(api, cuDeviceGetUuid, &uuid, device)) != TF_OK) return st;
    std::memcpy(out->uuid, uuid.bytes, sizeof out->uuid);
    size_t bytes = 0;
    if ((st = TF_CU(api, cuDeviceTotalMem, &bytes, device)) != TF_OK) return st;
    out->total_memory_bytes = bytes;
    const struct {
        CUdevice_attribute attr;
        int32_t *field;
    } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &out->compute_capability_major},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &out->compute_capability_minor},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &out->multiprocessor_count},
        {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, &out->pci_domain_id},
        {CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, &out->pci_bus_id},
        {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, &out->pci_device_id},
    };
    for (const auto &a : attrs)
        if ((st = attribute(api, device, a.attr, a.field)) != TF_OK) return st;
    return TF_OK;
}

std::string list_devices(const DriverApi &api) {
    KeepLastError keep;  // part of another failure's message, never one itself
    OperationScope operation("list_devices");
    std::string text;
    int32_t count = 0;
    if (count_devices(api, &count) != TF_OK)
        return std::string("device discovery failed too: ") + current_error().message;
    text = std::to_string(count) + (count == 1 ? " device" : " devices");
    if (count == 0) text = "no devices";
    for (int32_t i = 0; i < count; ++i) {
        CUdevice dev = 0;
        tf_device_properties info;
        if (TF_CU(api, cuDeviceGet, &dev, i) != TF_OK ||
            describe_device(api, i, dev, &info) != TF_OK) {
            text += (i ? ", " : ": ") + std::to_string(i) + " (cannot be described)";
            continue;
        }
        text += (i ? ", " : ": ") + std::to_string(i) + " \"" + info.name + "\" " +
                uuid_text(info.uuid);
    }
    return text;
}

tf_status lookup_device(const DriverApi &api, int32_t ordinal, CUdevice *out) {
    if (ordinal < 0)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "device ordinal %d is negative; found %s",
                       static_cast<int>(ordinal), list_devices(api).c_str());
    if (!api.cuDeviceGet) return fail_missing("cuDeviceGet");
    CUdevice dev = 0;
    CUresult r = api.cuDeviceGet(&dev, ordinal);
    if (r == CUDA_ERROR_INVALID_DEVICE)
        return fail(TF_ERROR_DEVICE_UNAVAILABLE, "cuDeviceGet", TF_CODE_CUDA, r,
                    "device %d is not available; found %s", static_cast<int>(ordinal),
                    list_devices(api).c_str());
    if (r != CUDA_SUCCESS) return fail_cuda(api, "cuDeviceGet", r);
    *out = dev;
    return TF_OK;
}

}  // namespace tf
