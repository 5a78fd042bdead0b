/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Versioned structs across the ABI: each starts with uint32_t struct_size and
// only grows at the end.
//
// INVARIANT: the library never reads or writes more than TF_MAX_STRUCT_SIZE
// bytes of a caller's struct.  A larger struct_size is garbage (a struct
// that was never initialised): every call that reads or writes a struct
// refuses it through check_struct_size, the *_init functions ignore it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tenferro_gpu.h"

namespace tf {

tf_status fail_struct_size(const char *name, uint32_t size, size_t min_size, const char *init)
    __attribute__((cold, noinline));

// TF_OK when a caller's `name`->struct_size (`size`) reaches `min_size`
// (the fields the call needs) and is at most TF_MAX_STRUCT_SIZE; otherwise
// TF_ERROR_INVALID_ARGUMENT, naming `init` (the struct's *_init).
inline tf_status check_struct_size(const char *name, uint32_t size, size_t min_size,
                                   const char *init) {
    if (size >= min_size && size <= TF_MAX_STRUCT_SIZE) return TF_OK;
    return fail_struct_size(name, size, min_size, init);
}

// The *_init functions: writes `defaults` into the caller's struct of
// `caller_size` bytes (the sizeof the caller was compiled with): as much of
// it as fits, zero past this library's struct, struct_size = caller_size.
// A struct too small to hold struct_size, one above TF_MAX_STRUCT_SIZE, or
// NULL, is left alone.  Never writes past caller_size, so an older caller's
// smaller struct is safe.
template <class T>
void init_sized(T *dst, size_t caller_size, const T &defaults) {
    if (!dst || caller_size < sizeof(uint32_t) || caller_size > TF_MAX_STRUCT_SIZE) return;
    const size_t n = caller_size < sizeof(T) ? caller_size : sizeof(T);
    std::memcpy(static_cast<void *>(dst), &defaults, n);
    if (caller_size > sizeof(T))
        std::memset(reinterpret_cast<unsigned char *>(dst) + sizeof(T), 0, caller_size - sizeof(T));
    dst->struct_size = static_cast<uint32_t>(caller_size);
}

// Copies `src` into the caller's `dst`, but no more than the caller's
// struct_size says it has room for; dst->struct_size is kept (and was
// checked with check_struct_size).
template <class T>
void copy_out_sized(T *dst, const T &src) {
    const uint32_t caller_size = dst->struct_size;
    const size_t n = caller_size < sizeof(T) ? caller_size : sizeof(T);
    std::memcpy(static_cast<void *>(dst), &src, n);
    dst->struct_size = caller_size;
}

// Reads a caller's struct of `caller_size` bytes (checked with
// check_struct_size) into `out` (which holds the defaults): fields past
// caller_size keep their defaults.  Bytes past sizeof(T) must be zero: a
// newer caller asking for something this library cannot do must hear so.
// Returns false if they are not.
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
