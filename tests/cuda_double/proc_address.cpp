// SPDX-License-Identifier: MIT OR Apache-2.0
// cuGetProcAddress: the only way the library reaches the double's driver
// entry points.  The table is generated from src/driver/driver_entries.inc; each
// entry is converted to its PFN_<name>_v<version> type first, so an entry
// whose implementation has another prototype does not compile.
//
// The double implements one ABI per name (the one in the list).  A request
// with a cudaVersion older than that ABI would get a different prototype from
// a real driver, so the double refuses it (CUDA_ERROR_NOT_FOUND with
// CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) rather than hand back a
// function the caller would call with the wrong arguments.
#include <cstring>

#include "entries.h"
#include "state.h"

// cuda.h maps cuGetProcAddress to cuGetProcAddress_v2; the double exports
// both symbols, each with its own prototype.
#undef cuGetProcAddress

extern "C" {
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags);
}

namespace tfd {

using AnyFn = void (*)();

struct ProcEntry {
    const char *name;
    int version;
    AnyFn fn;
};

#define TF_DRIVER_ENTRY(name, version) \
    {#name, version,                   \
     reinterpret_cast<AnyFn>(static_cast<PFN_##name##_v##version>(&entry::d_##name))},
static const ProcEntry kEntries[] = {
#include "driver/driver_entries.inc"
#include "extra_entries.inc"
};
#undef TF_DRIVER_ENTRY

static_assert(sizeof(AnyFn) == sizeof(void *), "function and object pointers differ in size");

static void *as_object(AnyFn fn)
{
    void *p = nullptr;
    std::memcpy(&p, &fn, sizeof p);
    return p;
}

// Implementation for `name`, and the CUDA version its ABI dates from.
static AnyFn lookup(const std::string &name, int requested, int *abi_version)
{
    if (name == "cuGetProcAddress") {
        // Both generations are exported; pick the one the version asks for.
        *abi_version = requested >= 12000 ? 12000 : 11030;
        if (requested >= 12000)
            return reinterpret_cast<AnyFn>(
                static_cast<PFN_cuGetProcAddress_v12000>(&cuGetProcAddress_v2));
        return reinterpret_cast<AnyFn>(static_cast<PFN_cuGetProcAddress_v11030>(&cuGetProcAddress));
    }
    for (const ProcEntry &e : kEntries) {
        if (name == e.name) {
            *abi_version = e.version;
            return e.fn;
        }
    }
    return nullptr;
}

static CUresult not_found(void **pfn, CUdriverProcAddressQueryResult *status,
                          CUdriverProcAddressQueryResult why)
{
    *pfn = nullptr;
    if (status != nullptr)
        *status = why;
    return CUDA_ERROR_NOT_FOUND;
}

static CUresult resolve(const char *symbol, void **pfn, int version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult *status)
{
    const cuuint64_t known =
        CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (symbol == nullptr || pfn == nullptr || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    State &s = state();
    std::string name = symbol;
    s.requested_version[name] = version;
    s.requested_flags[name] = static_cast<long long>(flags);
    int abi = 0;
    AnyFn fn = lookup(name, version, &abi);
    if (fn == nullptr || s.hidden.count(name) != 0)
        return not_found(pfn, status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    if (version < abi)
        return not_found(pfn, status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    *pfn = as_object(fn);
    if (status != nullptr)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

}  // namespace tfd

extern "C" CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    return tfd::run("cuGetProcAddress_v2",
                    [&] { return tfd::resolve(symbol, pfn, cuda_version, flags, status); });
}

extern "C" CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
                                     cuuint64_t flags)
{
    return tfd::run("cuGetProcAddress",
                    [&] { return tfd::resolve(symbol, pfn, cuda_version, flags, nullptr); });
}
