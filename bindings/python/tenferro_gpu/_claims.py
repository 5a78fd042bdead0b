# SPDX-License-Identifier: MIT OR Apache-2.0
"""When the memory the binding owns is given back: device allocations
(tf_alloc), page-locked blocks (tf_host_alloc) and registrations
(tf_host_register).

NOTE memory is freed once.  Each such piece of memory has a Claims: the
count of the reasons not to give it back yet, and the free, which runs
once, when the count reaches zero.  The reasons:

- its owner's claim: the DeviceBuffer that allocated it, the HostBuffer,
  the HostRegistration; dropped by free() or close(), by the release of
  retire(), or when the owner is garbage;
- each export a consumer may still use: a DLPack tensor until its deleter
  runs, an object whose __cuda_array_interface__ was read until it is
  garbage, a HostBuffer's views (counted by its exporter, whose last
  release ends its owner's claim once closed);
- each hold of a retirement: after a copy failed, the device may still use
  the memory until it has passed the copy, which the retirement's release
  says.  A hold that cannot be retired is never released: the memory is
  leaked, as the header requires.

Exports keep the runtime alive (the consumer may use the memory until it
lets go).  A Claims and its free hold no runtime reference: the identity
and a weak reference to the owner's runtime, so that a retirement holding
it does not keep the runtime alive ("NOTE the last reference drains" in
_runtimes.py).  A free that finds no reference of the runtime frees
nothing: the memory goes with the runtime's primary context.
"""

from __future__ import annotations

import threading
import weakref
from typing import Callable, List, Optional

from . import _capi

# Re-entrant: a garbage collection may run a release while it is held.
lock = threading.RLock()


class Claims:
    """The reasons not to free one piece of memory yet (see above); the
    count starts at one, the owner's claim."""

    __slots__ = ("_count", "_free", "start", "end", "__weakref__")

    _free: Optional[Callable[[], int]]

    def __init__(self, free: Callable[[], int], start: int = 0, nbytes: int = 0) -> None:
        self._count = 1
        self._free = free
        self.start, self.end = start, start + nbytes

    def acquire(self) -> None:
        """One more reason (an export, a hold)."""
        with lock:
            if self._count == 0:
                raise RuntimeError("tenferro_gpu: memory acquired after its free")
            self._count += 1

    def release(self) -> int:
        """One reason less; the last runs the free and returns its status."""
        with lock:
            self._count -= 1
            free = self._free if self._count == 0 else None
            if free is not None:
                self._free = None
        return free() if free is not None else 0

    def release_quietly(self) -> None:
        """release() from cleanup nobody waits for (_capi.quietly)."""
        _capi.quietly(self.release)

    @property
    def freed(self) -> bool:
        return self._free is None


# The page-locked memory in use (blocks and registrations), to find what a
# host address belongs to.
_host: "weakref.WeakSet[Claims]" = weakref.WeakSet()


def track_host(claims: Claims) -> None:
    with lock:
        _host.add(claims)


def host_claims(address: int, nbytes: int) -> List[Claims]:
    """The unfreed page-locked memory overlapping [address, address + nbytes)."""
    end = address + max(nbytes, 1)
    with lock:
        return [c for c in _host if c.start < end and address < c.end and not c.freed]
