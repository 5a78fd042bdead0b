"""One reference to a library object, owned by a Python object.

The reference is released exactly once: by close() (or leaving a `with`
block), or by a weakref finalizer when the object is garbage-collected or
still open at interpreter exit.  The finalizer holds what the release
needs (never the owner itself), so a cycle cannot keep it alive.
"""

import weakref

from . import _capi


class Owned:
    __slots__ = ("_handle", "_finalizer", "__weakref__")
    _kind = "object"          # the class name in messages
    _closed_word = "closed"   # "freed" for memory

    def _own(self, handle, release, *extra):
        """Own `handle`; release(handle, *extra) returns a status or None."""
        self._handle = handle
        self._finalizer = weakref.finalize(self, release, handle, *extra)

    @property
    def handle(self):
        """The library's pointer (or address) as an integer, borrowed: valid
        while this object is open.  Raises ValueError once closed."""
        if not self._finalizer.alive:
            raise ValueError(f"the tenferro_gpu.{self._kind} is {self._closed_word}")
        return self._handle

    @property
    def closed(self):
        return not self._finalizer.alive

    def close(self):
        """Release the reference now.  Idempotent.  Raises the library's
        error if the release failed (what it held is then leaked, never
        released twice)."""
        if self._finalizer.alive:
            _capi.check(self._finalizer() or 0)

    def __enter__(self):
        self.handle
        return self

    def __exit__(self, *exc_info):
        self.close()
