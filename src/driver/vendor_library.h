/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Lazily loaded vendor libraries (cuBLAS, NVRTC): found by SONAME, newest
// major first, or at the absolute path an environment variable names.
//
// Like the driver, a vendor library is opened at most once per process with
// dlopen(RTLD_NOW | RTLD_LOCAL) and never closed; its functions come from
// dlsym on that handle.  Nothing links against it.
#pragma once

#include "driver/load_once.h"
#include "tenferro_gpu.h"

namespace tf {

struct VendorLibrarySpec {
    const char *what;            // "cuBLAS", for messages
    const char *env;             // "TENFERRO_GPU_CUBLAS"
    const char *const *sonames;  // newest first, NULL-terminated
};

// Outcome of one load attempt; trivially destructible so it can live in a
// function-local static that runs nothing at exit.
struct VendorLibrary {
    void *handle;        // NULL when not loaded
    const char *loaded;  // the SONAME or path that loaded
    tf_status status;    // TF_OK, or why not
    const char *call;    // what failed ("dlopen", "secure_getenv", "dlsym")
    char detail[400];    // the message, without the operation
};

// Tries the override, else each SONAME in turn.  Never records an error.
VendorLibrary open_vendor_library(const VendorLibrarySpec &spec);

// Marks `lib` unusable because it lacks the function `symbol`
// (TF_ERROR_NOT_SUPPORTED).
void refuse_missing_symbol(VendorLibrary *lib, const char *what, const char *symbol);

// Records lib's failure as the thread's error; returns its status.
tf_status fail_vendor_library(const VendorLibrary &lib);

// The file the loader opened for a dlopen handle, with symbolic links
// resolved (so libcublas.so.13 shows its full version), written into buf;
// NULL when the loader cannot tell.  For messages: a cold path.
const char *loaded_file(void *handle, char *buf, size_t cap);

// A library's function table with the outcome of loading it; kept in a
// function-local static of its loader, read-only once made.
template <class Api>
struct LoadedVendor {
    Api api;
    VendorLibrary lib;

    // The table, or NULL after recording the load failure.
    const Api *require() const {
        if (lib.status == TF_OK) return &api;
        fail_vendor_library(lib);
        return nullptr;
    }
};

// The process's one load of a vendor library: `open` runs once under the
// fork-safe LoadOnce `which` and its outcome is kept in `slot`.  NULL when
// a fork lost the load (driver/load_once.h).
template <class Api, class Open>
const LoadedVendor<Api> *load_vendor(Loaded which, LoadedVendor<Api> *slot, Open open) {
    return load_once(which).run([&] { *slot = open(); }) ? slot : nullptr;
}

// The table of a load_vendor() outcome, or NULL after recording
// why there is none (`what`, "cuBLAS", names the library).
template <class Api>
const Api *require_vendor(const LoadedVendor<Api> *loaded, const char *what) {
    if (!loaded) {
        fail_lost_load(what);
        return nullptr;
    }
    return loaded->require();
}

// Whether a load_vendor() outcome is usable; records nothing.
template <class Api>
bool vendor_loadable(const LoadedVendor<Api> *loaded) {
    return loaded && loaded->lib.status == TF_OK;
}

// Fills a table member from dlsym (the bits of a data pointer copied into a
// function pointer, which ISO C++ does not convert directly).
template <class Fn>
bool resolve_symbol(void *handle, const char *name, Fn *out);

}  // namespace tf

#include <dlfcn.h>

#include <cstring>

template <class Fn>
bool tf::resolve_symbol(void *handle, const char *name, Fn *out) {
    static_assert(sizeof(Fn) == sizeof(void *), "a function pointer the size of a data pointer");
    void *sym = dlsym(handle, name);
    std::memcpy(static_cast<void *>(out), &sym, sizeof sym);
    return sym != nullptr;
}
