# SPDX-License-Identifier: MIT OR Apache-2.0
"""One reference to a library object (an event, module, program), owned by
a Python object.

The reference is released exactly once: by close() (or leaving a `with`
block), or when the object is garbage-collected or still open at
interpreter exit; with a call in flight on another thread, when that call
returns ("NOTE calls hold their handle" in _handles.py).  The release
holds what it needs (never the owner itself), so a cycle cannot keep it
alive.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from . import _handles

T = TypeVar("T", bound="Owned")


class Owned:
    __slots__ = ("_handle", "_hc", "_cell", "__weakref__")
    _kind = "object"          # the class name in messages

    _handle: int
    _hc: Any                  # the Ref every call passes; None once closed
    _cell: _handles.Cell

    def _own(self, handle: int, release: Callable[..., Optional[int]], *extra: Any) -> None:
        """Own `handle`; release(handle, *extra) returns a status or None
        and must not raise."""
        self._handle = handle
        _handles.own(self, handle, release, *extra)

    @property
    def handle(self) -> int:
        """The library's pointer as an integer, borrowed: valid while this
        object is open.  Raises ValueError once closed."""
        if self._hc is None:
            self._closed_error()
        return self._handle

    def _closed_error(self) -> None:
        raise ValueError(f"the tenferro_gpu.{self._kind} is closed")

    def _ref(self) -> Any:
        """The Ref, for a call to pass (and hold); ValueError once closed."""
        ref = self._hc
        if ref is None:
            self._closed_error()
        return ref

    @property
    def closed(self) -> bool:
        return self._hc is None

    def close(self) -> None:
        """Release the reference (at once unless a call is in flight).
        Idempotent.  Raises the library's error if the release failed (what
        it held is then leaked, never released twice)."""
        _handles.close(self)

    def __enter__(self: T) -> T:
        self.handle
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
