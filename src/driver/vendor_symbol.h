/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// tf_cublas_symbol and tf_cublaslt_symbol: a function of a loaded vendor
// library, by name, inside tf::guarded.
#pragma once

#include <cstring>

#include "driver/vendor_library.h"
#include "util/error.h"

namespace tf {

// `name` must start with `prefix`: dlsym on a library's handle also searches
// its dependencies (libc among them), and only the library's own names are
// handed out.  `load()` gives the dlopen handle, or NULL after recording why.
template <class Load>
tf_status vendor_symbol(const char *what, const char *prefix, const char *name, void **out_function,
                        Load load) {
    if (!name) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "name is NULL");
    if (!out_function) return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "out_function is NULL");
    if (std::strncmp(name, prefix, std::strlen(prefix)) != 0)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "'%s' is not a %s symbol (its name must start with \"%s\")", name, what,
                       prefix);
    void *handle = load();
    if (!handle) return current_error().status;
    void *fn = nullptr;
    if (!resolve_symbol(handle, name, &fn))
        return fail(TF_ERROR_NOT_SUPPORTED, "dlsym", TF_CODE_NONE, 0,
                    "the loaded %s has no symbol '%s'", what, name);
    *out_function = fn;
    return TF_OK;
}

}  // namespace tf
