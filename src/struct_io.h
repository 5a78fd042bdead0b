// Versioned structs across the ABI: each starts with uint32_t struct_size and
// only grows at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tf {

// Copies `src` into the caller's `dst`, but no more than the caller's
// struct_size says it has room for; dst->struct_size is kept.
template <class T>
void copy_out_sized(T *dst, const T &src) {
    const uint32_t caller_size = dst->struct_size;
    const size_t n = caller_size < sizeof(T) ? caller_size : sizeof(T);
    std::memcpy(static_cast<void *>(dst), &src, n);
    dst->struct_size = caller_size;
}

// Reads a caller's struct of `caller_size` bytes into `out` (which holds the
// defaults): fields past caller_size keep their defaults.  Bytes past
// sizeof(T) must be zero: a newer caller asking for something this library
// cannot do must hear so.  Returns false if they are not.
template <class T>
bool copy_in_sized(const T *in, T *out) {
    const size_t caller_size = in->struct_size;
    const size_t n = caller_size < sizeof(T) ? caller_size : sizeof(T);
    std::memcpy(static_cast<void *>(out), in, n);
    const unsigned char *tail = reinterpret_cast<const unsigned char *>(in);
    for (size_t i = sizeof(T); i < caller_size; ++i)
        if (tail[i] != 0) return false;
    out->struct_size = sizeof(T);
    return true;
}

}  // namespace tf
