// SPDX-License-Identifier: MIT OR Apache-2.0
#include "util/struct_io.h"

#include "util/error.h"

namespace tf {

tf_status fail_struct_size(const char *name, uint32_t size, size_t min_size, const char *init) {
    if (size < min_size)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT, "%s->struct_size %u is too small; call %s first",
                       name, static_cast<unsigned>(size), init);
    return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                   "%s->struct_size %u is over TF_MAX_STRUCT_SIZE (%d): not a struct that %s "
                   "initialised",
                   name, static_cast<unsigned>(size), TF_MAX_STRUCT_SIZE, init);
}

}  // namespace tf
