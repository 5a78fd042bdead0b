/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Helpers shared by the companion doubles (cuBLAS, NVRTC).  They keep no
// state of their own that tests need: calls are logged, counted and fault
// injected through the libcuda double (tfd_enter_ex), and all their work
// runs under its mutex (tfd_lock).
#ifndef TFD_COMPANION_H
#define TFD_COMPANION_H

#include <new>

#include "raw_enum.h"
#include "tfd_control.h"

namespace tfd {

// Holds the driver double's (recursive) mutex for a scope.
class Locked {
public:
    Locked()
    {
        tfd_lock();
    }
    ~Locked()
    {
        tfd_unlock();
    }
    Locked(const Locked &) = delete;
    Locked &operator=(const Locked &) = delete;
};

// Run one companion entry point returning a status enum: log it, apply the
// fault rules (a fault-after code replaces a successful status only), and run
// body under the mutex.  No exception leaves it (callers are C): running out
// of host memory returns `oom`, anything else `internal`.
template <class Status, class Body>
Status run_companion(const char *entry, Status oom, Status internal, Body body) noexcept
{
    Locked lock;
    int after = 0;
    int before = tfd_enter_ex(entry, &after);
    if (before != 0)
        return static_cast<Status>(before);
    Status st = internal;
    try {
        st = body();
    } catch (const std::bad_alloc &) {
        return oom;
    } catch (...) {
        return internal;
    }
    if (static_cast<int>(st) == 0 && after != 0)
        return static_cast<Status>(after);
    return st;
}

}  // namespace tfd

#endif
