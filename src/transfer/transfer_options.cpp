// SPDX-License-Identifier: MIT OR Apache-2.0
#include "transfer/transfer_options.h"

#include <sched.h>

#include "util/error.h"

namespace tf {

tf_status read_transfer_options(const tf_runtime_options &in, RuntimeOptions *out) {
    if (in.download_threads > TF_MAX_DOWNLOAD_THREADS)
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "download_threads %u is outside 1..%d (0 picks the default)",
                       static_cast<unsigned>(in.download_threads), TF_MAX_DOWNLOAD_THREADS);
    const uint32_t chunk = in.download_chunk_bytes;
    if (chunk != 0 && (chunk < TF_MIN_DOWNLOAD_CHUNK_BYTES || chunk > TF_MAX_DOWNLOAD_CHUNK_BYTES ||
                       chunk % 4096 != 0))
        return TF_FAIL(TF_ERROR_INVALID_ARGUMENT,
                       "download_chunk_bytes %u is not a multiple of 4096 in %u..%u (0 picks "
                       "the default)",
                       static_cast<unsigned>(chunk),
                       static_cast<unsigned>(TF_MIN_DOWNLOAD_CHUNK_BYTES),
                       static_cast<unsigned>(TF_MAX_DOWNLOAD_CHUNK_BYTES));
    out->download_threads = in.download_threads;
    out->download_chunk_bytes = chunk;
    return TF_OK;
}

unsigned download_threads(const RuntimeOptions &options) {
    if (options.download_threads) return options.download_threads;
    unsigned threads = TF_DEFAULT_DOWNLOAD_THREADS;
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) {
        int n = CPU_COUNT(&cpus);
        if (n > 0 && static_cast<unsigned>(n) < threads) threads = static_cast<unsigned>(n);
    }
    return threads;
}

}  // namespace tf
