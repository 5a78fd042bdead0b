/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The transfer fields of tf_runtime_options: validation and defaults.
#pragma once

#include <cstddef>

#include "runtime/runtime_state.h"

namespace tf {

// Checks the transfer fields of a caller's options (already copied in) and
// stores them into `out`.  TF_ERROR_INVALID_ARGUMENT with a message if one
// is out of range.
tf_status read_transfer_options(const tf_runtime_options &in, RuntimeOptions *out);

// Host threads that copy a pageable download, the caller included: the
// option, or TF_DEFAULT_DOWNLOAD_THREADS capped by the CPUs this process may
// run on.
unsigned download_threads(const RuntimeOptions &options);

// Bytes of each staging buffer of a slot's ring.
inline size_t download_chunk_bytes(const RuntimeOptions &options) {
    return options.download_chunk_bytes ? options.download_chunk_bytes
                                        : TF_DEFAULT_DOWNLOAD_CHUNK_BYTES;
}

}  // namespace tf
