// SPDX-License-Identifier: MIT OR Apache-2.0
#include "driver/vendor_library.h"

#include <limits.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>

#include "util/env.h"
#include "util/error.h"

namespace tf {
namespace {

VendorLibrary refused(tf_status status, const char *call) {
    VendorLibrary lib{};
    lib.status = status;
    lib.call = call;
    return lib;
}

// The loader's reason, shortened to what names the file and the cause.
const char *dl_reason() {
    const char *why = dlerror();
    return why ? why : "unknown reason";
}

VendorLibrary open_override(const VendorLibrarySpec &spec, const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        VendorLibrary lib{};
        lib.handle = h;
        lib.loaded = path;
        lib.status = TF_OK;
        lib.call = "";
        return lib;
    }
    VendorLibrary lib = refused(TF_ERROR_LIBRARY_NOT_FOUND, "dlopen");
    std::snprintf(lib.detail, sizeof lib.detail,
                  "cannot load %s from %s=%s (%s); point %s at the library's absolute path, or "
                  "unset it to search LD_LIBRARY_PATH",
                  spec.what, spec.env, path, dl_reason(), spec.env);
    return lib;
}

}  // namespace

VendorLibrary open_vendor_library(const VendorLibrarySpec &spec) {
    bool rejected = false;
    const char *path = library_override(spec.env, &rejected);
    if (rejected) {
        VendorLibrary lib = refused(TF_ERROR_LIBRARY_NOT_FOUND, "secure_getenv");
        std::snprintf(lib.detail, sizeof lib.detail,
                      "%s must be an absolute path; it was ignored and %s was not loaded", spec.env,
                      spec.what);
        return lib;
    }
    if (path) return open_override(spec, path);
    const char *last_reason = "no candidate";
    for (const char *const *name = spec.sonames; *name; ++name) {
        void *h = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
        if (h) {
            VendorLibrary lib{};
            lib.handle = h;
            lib.loaded = *name;
            lib.status = TF_OK;
            lib.call = "";
            return lib;
        }
        last_reason = dl_reason();
    }
    VendorLibrary lib = refused(TF_ERROR_LIBRARY_NOT_FOUND, "dlopen");
    std::snprintf(lib.detail, sizeof lib.detail,
                  "%s not found (%s); add the folder that holds %s (the CUDA toolkit's lib64, "
                  "or the NVIDIA wheel's lib folder) to LD_LIBRARY_PATH, or set %s to the "
                  "library's absolute path",
                  spec.what, last_reason, spec.sonames[0], spec.env);
    return lib;
}

void refuse_missing_symbol(VendorLibrary *lib, const char *what, const char *symbol) {
    lib->status = TF_ERROR_NOT_SUPPORTED;
    lib->call = "dlsym";
    std::snprintf(lib->detail, sizeof lib->detail,
                  "the %s loaded from %s lacks %s, which this library needs; install a newer %s",
                  what, lib->loaded, symbol, what);
}

tf_status fail_vendor_library(const VendorLibrary &lib) {
    return fail(lib.status, lib.call, TF_CODE_NONE, 0, "%s", lib.detail);
}

const char *loaded_file(void *handle, char *buf, size_t cap) {
    struct link_map *map = nullptr;
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name ||
        !map->l_name[0])
        return nullptr;
    char real[PATH_MAX];
    std::snprintf(buf, cap, "%s", realpath(map->l_name, real) ? real : map->l_name);
    return buf;
}

}  // namespace tf
