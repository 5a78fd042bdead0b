/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The one model of every opaque object a caller holds: tf_runtime,
// tf_event, tf_module, tf_program and tf_graph (NOTE [handle model] in
// src/README.md).
//
// Each derives from Handle: a tag that says what it is while it lives, a
// reference count, and how to free its shell.
//  - check_handle() tells a live handle of a kind from NULL, from a
//    released one and from a pointer that never was one;
//  - *_retain adds a reference (retain_handle), *_release drops one
//    (drop_reference); the last marks the handle dead and its owner
//    releases what it holds, then gives the shell to the quarantine;
//  - the quarantine keeps the last kQuarantine released shells (of every
//    kind) allocated and tagged dead, so a released handle passed back is
//    TF_ERROR_INVALID_HANDLE "<kind> ... was already released" instead of a
//    read of freed memory.  An older one is freed: undefined behaviour, as
//    the header says.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenferro_gpu.h"

namespace tf {

constexpr uint64_t kDeadHandle = 0x74665f646561643full;  // "tf_dead?"
// Released shells kept allocated, of every kind together.
constexpr size_t kQuarantine = 4096;

struct Handle {
    // tag: the kind's live tag; free: deletes the most derived object.
    Handle(uint64_t tag, void (*free)(Handle *)) : delete_shell(free), magic(tag) {}
    Handle(const Handle &) = delete;
    Handle &operator=(const Handle &) = delete;

    void (*const delete_shell)(Handle *);
    std::atomic<uint64_t> magic;  // the live tag, or kDeadHandle once released
    std::atomic<uint32_t> refs{1};
};

// What check_handle() says about a kind (the 1.0 statuses and messages):
//   NULL                   TF_ERROR_INVALID_ARGUMENT "<what> is NULL"
//   released               TF_ERROR_INVALID_HANDLE "<what> %p was already released"
//   never a handle of it   `foreign` "%p is not <article> <what>"
struct HandleKind {
    uint64_t live;        // the tag of a live handle of this kind
    const char *what;     // "runtime handle", "event"
    tf_status foreign;    // TF_ERROR_INVALID_HANDLE (runtimes) or _INVALID_ARGUMENT
    const char *article;  // "a" or "a live"
};

// TF_OK for a live handle of `kind`; else records why not (see HandleKind).
// Reads the tag only: a pointer that never was a handle must at least
// point to readable memory, as the header says.
inline tf_status check_handle(const HandleKind &kind, const Handle *h);

// One more reference to a checked handle.
inline void retain_handle(Handle *h) { h->refs.fetch_add(1, std::memory_order_relaxed); }

// Drops a reference to a checked handle; true when it was the last one:
// the handle is then marked dead, and the caller releases what it holds
// and hands the shell to quarantine().
bool drop_reference(Handle *h);

// Keeps a dead shell allocated (tagged dead) until kQuarantine later
// shells have come in; then frees it (Handle::delete_shell).
void quarantine(Handle *h);

// Handle::delete_shell for a handle of type T.
template <class T>
void free_shell(Handle *h) {
    delete static_cast<T *>(h);
}

tf_status fail_handle(const HandleKind &kind, const Handle *h, uint64_t magic)
    __attribute__((cold, noinline));

inline tf_status check_handle(const HandleKind &kind, const Handle *h) {
    if (h) {
        const uint64_t magic = h->magic.load(std::memory_order_acquire);
        if (magic == kind.live) return TF_OK;
        return fail_handle(kind, h, magic);
    }
    return fail_handle(kind, h, 0);
}

}  // namespace tf
