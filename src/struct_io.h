// Versioned structs across the ABI: each starts with uint32_t struct_size and
// only grows at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tf {

// The *_init functions: writes `defaults` into the caller's struct of
// `caller_size` bytes (the sizeof the caller was compiled with): as much of
// it as fits, zero past this library's struct, struct_size = caller_size.
// A struct too small to hold struct_size, or NULL, is left alone.  Never
// writes past caller_size, so an older caller's smaller struct is safe.
template <class T>
void init_sized(T *dst, size_t caller_size, const T &defaults) {
    if (!dst || caller_size < sizeof(uint32_t) || caller_size > UINT32_MAX) return;
    const size_t n = caller_size < sizeof(T) ? caller_size : sizeof(T);
    std::memcpy(static_cast<void *>(dst), &defaults, n);
    if (caller_size > sizeof(T))
        std::memset(reinterpret_cast<unsigned char *>(dst) + sizeof(T), 0, caller_size - sizeof(T));
    dst->struct_size = static_cast<uint32_t>(caller_size);
}

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
