# SPDX-License-Identifier: MIT OR Apache-2.0
"""The runtime reference that the device allocations made through one
Runtime (or Stream) object share.

NOTE one owner per runtime object.  An allocation keeps its runtime open
until its memory is freed (DeviceBuffer's docstring).  Instead of a clone
per allocation (a tf_runtime_retain, a Ref with its finalizer, and a
release at the free), the allocations made through one Runtime object
share one clone of it, made at the first allocation: the owner.  It counts
its leases, the allocations whose memory is not freed yet.  The owner is
closed (its reference released, at once or when the call in flight
returns: NOTE calls hold their handle) when its last lease ends and the
Runtime that made it is closed or garbage, or when that Runtime goes with
no lease left; so the runtime's last reference still goes right after the
last free, as with a clone per allocation.  A freed buffer keeps only a
closed owner (DeviceBuffer.runtime), never the runtime open.  A lease whose
free never runs (memory the header says to leak) keeps the owner open as
long as some buffer of that Runtime object exists.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .runtime import Runtime

# Re-entrant: a garbage collection may end a lease while it is held.
_lock = threading.RLock()


def lease(runtime: "Runtime") -> "Runtime":
    """The owner that an allocation through `runtime` keeps, with one lease
    more; ValueError if `runtime` is closed.  end() gives the lease back."""
    with _lock:
        owner = runtime._shared
        if owner is not None and owner._hc is not None and runtime._hc is not None:
            owner._leases += 1
            return owner
    owner = runtime._owner_clone()          # raises when closed
    owner._leases = 1
    owner._parent = weakref.ref(runtime, _parent_gone(weakref.ref(owner)))
    with _lock:
        old, runtime._shared = runtime._shared, owner
    if old is not None:                     # a concurrent first lease, or a closed owner
        _drop(old)
    return owner


def end(owner: "Runtime") -> None:
    """One lease of `owner` ends (its allocation's free ran or found no
    runtime)."""
    with _lock:
        owner._leases -= 1
        if owner._leases > 0:
            return
        parent = owner._parent()
        if parent is not None and parent._hc is not None and parent._shared is owner:
            return
    owner._hc = None


def released(runtime: "Runtime") -> None:
    """`runtime` was closed: its owner goes now unless a lease is left."""
    with _lock:
        owner, runtime._shared = runtime._shared, None
    if owner is not None:
        _drop(owner)


def _drop(owner: "Runtime") -> None:
    """The Runtime that made `owner` no longer holds it."""
    with _lock:
        idle = owner._leases == 0
    if idle:
        owner._hc = None


def _parent_gone(owner: "weakref.ref[Runtime]") -> Callable[[Any], None]:
    """The callback of the owner's weak reference to its Runtime: that
    Runtime is garbage (never closed), so the owner goes once idle."""
    def gone(_: Any) -> None:
        alive = owner()
        if alive is not None:
            _drop(alive)
    return gone
