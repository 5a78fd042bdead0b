# SPDX-License-Identifier: MIT OR Apache-2.0
"""One reference to a library object, owned by a Python object.

The reference is released exactly once: by close() (or leaving a `with`
block), or by a weakref finalizer when the object is garbage-collected or
still open at interpreter exit.  The finalizer holds what the release
needs (never the owner itself), so a cycle cannot keep it alive.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Optional, TypeVar

from . import _capi

T = TypeVar("T", bound="Owned")


class Owned:
    __slots__ = ("_handle", "_finalizer", "__weakref__")
    _kind = "object"          # the class name in messages
    _closed_word = "closed"   # "freed" for memory

    _handle: int
    _finalizer: weakref.finalize

    def _own(self, handle: int, release: Callable[..., Optional[int]], *extra: Any) -> None:
        """Own `handle`; release(handle, *extra) returns a status or None."""
        self._handle = handle
        self._finalizer = weakref.finalize(self, release, handle, *extra)

    @property
    def handle(self) -> int:
        """The library's pointer (or address) as an integer, borrowed: valid
        while this object is open.  Raises ValueError once closed."""
        if not self._finalizer.alive:
            raise ValueError(f"the tenferro_gpu.{self._kind} is {self._closed_word}")
        return self._handle

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Release the reference now.  Idempotent.  Raises the library's
        error if the release failed (what it held is then leaked, never
        released twice)."""
        if self._finalizer.alive:
            _capi.check(self._finalizer() or 0)

    def __enter__(self: T) -> T:
        self.handle
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
