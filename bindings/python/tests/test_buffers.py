# SPDX-License-Identifier: MIT OR Apache-2.0
"""The buffer helper the transfers use: any contiguous buffer, writable
when written, held for the whole C call."""

import array
import ctypes

import pytest

from tenferro_gpu._buffers import borrow


def _write(address, data):
    ctypes.memmove(address, data, len(data))


def _read(address, n):
    return ctypes.string_at(address, n)


def test_a_bytearray_is_written_in_place():
    target = bytearray(8)
    with borrow(target, writable=True) as (address, n):
        assert n == 8
        _write(address, b"abcdefgh")
    assert target == b"abcdefgh"


def test_a_memoryview_slice_starts_at_its_offset():
    base = bytearray(b"0123456789")
    with borrow(memoryview(base)[3:7], writable=True) as (address, n):
        assert n == 4
        _write(address, b"WXYZ")
    assert base == b"012WXYZ789"


def test_read_only_objects_are_readable_not_writable():
    data = b"read only"
    with borrow(data, writable=False) as (address, n):
        assert _read(address, n) == data
    for obj in (data, memoryview(data), "text"):
        with pytest.raises(TypeError, match="writable"):
            with borrow(obj, writable=True):
                pass


def test_objects_without_a_buffer_are_refused():
    for obj in ([1, 2, 3], None, 3):
        with pytest.raises(TypeError, match="buffer protocol"):
            with borrow(obj, writable=False):
                pass


def test_array_module_arrays_and_empty_buffers():
    a = array.array("i", [1, 2, 3])
    with borrow(a, writable=True) as (address, n):
        assert n == 12
        _write(address, array.array("i", [7, 8, 9]).tobytes())
    assert a.tolist() == [7, 8, 9]
    with borrow(bytearray(), writable=True) as (_, n):
        assert n == 0


def test_the_buffer_is_held_until_the_block_ends():
    target = bytearray(4)
    with borrow(target, writable=True):
        with pytest.raises(BufferError):
            target.extend(b"more")      # no resize while C may write
    target.extend(b"more")
    assert len(target) == 8


def test_numpy_arrays_of_any_contiguous_order():
    np = pytest.importorskip("numpy")
    c = np.zeros((2, 3), dtype=np.float32)
    with borrow(c, writable=True) as (address, n):
        assert n == 24
        _write(address, np.arange(6, dtype=np.float32).tobytes())
    assert c.tolist() == [[0, 1, 2], [3, 4, 5]]
    f = np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3))
    with borrow(f, writable=False) as (address, n):
        assert _read(address, n) == f.tobytes(order="A")
    with pytest.raises(BufferError, match="contiguous"):
        with borrow(c[:, ::2], writable=True):
            pass
    frozen = np.ones(4, dtype=np.uint8)
    frozen.flags.writeable = False
    with borrow(frozen, writable=False) as (address, n):
        assert _read(address, n) == b"\x01" * 4
    with pytest.raises(TypeError, match="writable"):
        with borrow(frozen, writable=True):
            pass
