# SPDX-License-Identifier: MIT OR Apache-2.0
"""Borrowing the memory of any Python buffer for a C call.

Transfers take host memory from any object with the buffer protocol:
bytes, bytearray, memoryview, array.array, mmap, NumPy arrays, and the
NumPy view of a CPU tensor (torch.Tensor.numpy()).  `borrow` exports the
object's buffer with PyObject_GetBuffer for the duration of a `with` block:

    with borrow(out, writable=True) as (address, nbytes):
        check(api().tf_download(handle, dptr, address, nbytes))

While the export is held the object cannot be resized or freed (a
bytearray refuses to grow, NumPy refuses resize), so the memory stays valid
even though ctypes releases the GIL around the C call and other threads
run.  The buffer must be contiguous (C or Fortran order); its bytes are
copied in memory order.  Writable borrows refuse read-only objects.
"""

from __future__ import annotations

import contextlib
import ctypes
import weakref
from ctypes import POINTER, Structure, c_char_p, c_int, c_ssize_t, c_void_p
from typing import Iterator, Tuple

# Flags of PyObject_GetBuffer (Include/pybuffer.h; part of the stable ABI).
PyBUF_WRITABLE = 0x0001
PyBUF_ND = 0x0008
PyBUF_STRIDES = 0x0010 | PyBUF_ND
PyBUF_ANY_CONTIGUOUS = 0x0080 | PyBUF_STRIDES


class _PyBuffer(Structure):
    """Py_buffer (stable ABI since Python 3.11, same layout before)."""
    _fields_ = [
        ("buf", c_void_p),
        ("obj", c_void_p),
        ("len", c_ssize_t),
        ("itemsize", c_ssize_t),
        ("readonly", c_int),
        ("ndim", c_int),
        ("format", c_char_p),
        ("shape", POINTER(c_ssize_t)),
        ("strides", POINTER(c_ssize_t)),
        ("suboffsets", POINTER(c_ssize_t)),
        ("internal", c_void_p),
    ]


# pythonapi holds the GIL and turns a set Python exception into a raise.
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, POINTER(_PyBuffer), c_int]
_get_buffer.restype = c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [POINTER(_PyBuffer)]
_release_buffer.restype = None


def _describe(obj: object) -> str:
    return type(obj).__module__ + "." + type(obj).__qualname__


class Export:
    """A held export of an object's buffer (PyObject_GetBuffer) that lives
    past one call: the memory of an asynchronous copy or a registration
    stays valid (and the object unresizable) until release().  A weakref
    finalizer releases it if the holder is dropped first."""

    __slots__ = ("address", "nbytes", "obj", "_finalizer", "__weakref__")

    address: int
    nbytes: int
    obj: object

    def __init__(self, obj: object, *, writable: bool) -> None:
        view = _get(obj, writable)
        self.address, self.nbytes, self.obj = view.buf or 0, view.len, obj
        self._finalizer = weakref.finalize(self, _release_buffer, ctypes.byref(view))

    def release(self) -> None:
        """Release the export.  Idempotent."""
        self._finalizer()

    @property
    def released(self) -> bool:
        return not self._finalizer.alive


def _get(obj: object, writable: bool) -> _PyBuffer:
    """obj's buffer, exported (the caller releases it)."""
    if writable and isinstance(obj, (bytes, str)):
        raise TypeError(f"expected a writable buffer (bytearray, memoryview, "
                        f"NumPy array), got read-only {_describe(obj)}")
    try:
        memoryview(obj).release()      # type: ignore[arg-type]  # has a buffer at all?
    except TypeError:
        raise TypeError(f"expected an object with the buffer protocol "
                        f"(bytes, bytearray, memoryview, NumPy array), got "
                        f"{_describe(obj)}") from None
    view = _PyBuffer()
    flags = PyBUF_ANY_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0)
    try:
        _get_buffer(obj, ctypes.byref(view), flags)
    except (BufferError, ValueError) as e:   # NumPy says ValueError
        if writable and memoryview(obj).readonly:   # type: ignore[arg-type]
            raise TypeError(f"expected a writable buffer, got a read-only "
                            f"{_describe(obj)}") from None
        raise BufferError(f"{_describe(obj)} cannot be borrowed as one "
                          f"contiguous block of memory: {e}") from None
    return view


@contextlib.contextmanager
def borrow(obj: object, *, writable: bool) -> Iterator[Tuple[int, int]]:
    """Yield (address, nbytes) of obj's memory while holding its buffer.

    Raises TypeError when obj has no buffer or (writable=True) a read-only
    one, BufferError when its memory is not contiguous.  The address is 0
    only for an empty buffer, where nbytes is 0.
    """
    view = _get(obj, writable)
    try:
        yield (view.buf or 0, view.len)
    finally:
        _release_buffer(ctypes.byref(view))
