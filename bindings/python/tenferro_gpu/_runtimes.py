# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the binding knows of each runtime (by identity): the references it
holds, and the retirements it queued that have not been released.

NOTE the last reference drains.  A retirement (Runtime.retire and the
binding's own: DeviceBuffer.retire, the holds after a failed copy) runs its
release at a later retire, poll or sync, or at the runtime's teardown,
where it may not call the runtime.  The binding's own releases hold no
runtime reference (_claims.py), so dropping every handle does reach the
last reference; the finalizer of the binding's last one then first syncs
the slots that have retirements pending (the drain), so that they run while
the runtime can still free what they release, and only then releases it.
A release that finds no reference of its runtime in the binding (the
teardown, or C code holding the last one) frees nothing: what it held goes
with the runtime's primary context.  A release of the user's own holds what
its arguments reference, a runtime included: it runs at a later sync.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any, Callable, Dict, Optional

from . import _capi


class _Runtime:
    __slots__ = ("live", "refs", "pending", "drain")

    def __init__(self) -> None:
        self.live = 0                     # the binding's references
        self.refs: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.pending: Dict[int, int] = {}  # slot -> retirements not released
        self.drain: Optional[int] = None  # the draining reference's handle


_runtimes: Dict[int, _Runtime] = {}
# Re-entrant: a garbage collection may run a release while it is held.
_lock = threading.RLock()


def _entry(identity: int) -> _Runtime:
    entry = _runtimes.get(identity)
    if entry is None:
        entry = _runtimes[identity] = _Runtime()
    return entry


def added(identity: int, ref: Any) -> None:
    """A Ref of the runtime `identity` now exists."""
    with _lock:
        entry = _entry(identity)
        entry.live += 1
        entry.refs.add(ref)


def release(handle: int, identity: int) -> int:
    """The finalizer of a Ref of runtime `identity`: drain if it is the
    binding's last one, then tf_runtime_release."""
    with _lock:
        entry = _entry(identity)
        entry.live -= 1
        last = entry.live == 0
        drain = last and bool(entry.pending)
    if drain:
        _drain(entry, handle)
    st = int(_capi.api().tf_runtime_release(handle))
    with _lock:
        if entry.live == 0 and not entry.pending and _runtimes.get(identity) is entry:
            del _runtimes[identity]
    return st


def _drain(entry: _Runtime, handle: int) -> None:
    """Sync each slot with retirements pending, through `handle` (still
    held), so that their releases run now."""
    api = _capi.api()
    entry.drain = handle
    try:
        for slot in sorted(entry.pending):
            bound = ctypes.c_void_p()
            if api.tf_runtime_bind_slot(handle, slot, ctypes.byref(bound)) == 0:
                api.tf_runtime_sync(bound.value)
                api.tf_runtime_release(bound.value)
        api.tf_workspace_poll(handle)
    finally:
        entry.drain = None


def retiring(identity: int, slot: int) -> None:
    """A retirement on `slot` is about to be queued."""
    with _lock:
        entry = _entry(identity)
        entry.pending[slot] = entry.pending.get(slot, 0) + 1


def retired(identity: int, slot: int) -> None:
    """A retirement on `slot` was released, or refused."""
    with _lock:
        entry = _runtimes.get(identity)
        if entry is None:
            return
        left = entry.pending.get(slot, 0) - 1
        if left > 0:
            entry.pending[slot] = left
        else:
            entry.pending.pop(slot, None)


def _close(runtime: Any) -> None:
    runtime._hc = None


def free_through(identity: int, owner: "weakref.ref[Any]", free: Callable[[Any], int],
                 after: Callable[[Any], None] = _close) -> int:
    """free(handle) for memory of runtime `identity` (a Claims' free: NOTE
    memory is freed once in _claims.py): through the Runtime that owns the
    memory while it is open, else any reference the binding holds; with
    none, nothing is called (0).  Then after(owner) (default: the owner's
    reference goes), if the owner still exists."""
    runtime = owner()
    try:
        handle = runtime._hc if runtime is not None else None
        if handle is None:
            handle = handle_for(identity)
        return free(handle) if handle is not None else 0
    finally:
        if runtime is not None:
            after(runtime)


def handle_for(identity: int) -> Any:
    """A handle of runtime `identity` the binding holds (a Ref, or during
    the drain the draining reference's), or None."""
    with _lock:
        entry = _runtimes.get(identity)
        if entry is None:
            return None
        for ref in entry.refs:
            return ref
        return entry.drain
