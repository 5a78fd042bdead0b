# SPDX-License-Identifier: MIT OR Apache-2.0
"""DeviceBuffer with an element type and a shape: empty / to_device,
indexing and slicing into views that share (and keep) the memory, view()
and reshape(), item() and to_numpy()."""

import array
import gc

import pytest

import tenferro_gpu as tg
import support

np = pytest.importorskip("numpy")


def test_dtypes_accept_what_users_have():
    f4 = tg.dtype("float32")
    for spec in ("float32", "<f4", "f4", "f", np.float32, np.dtype("float32"), "torch.float32",
                 f4):
        assert tg.dtype(spec) is f4 and f4 == spec
    assert tg.dtype(float) == "float64" and tg.dtype(int) == "int64" and tg.dtype(bool) == "bool"
    assert tg.dtype("bfloat16").typestr is None and tg.dtype("bfloat16").itemsize == 2
    assert tg.dtype("complex64").dlpack == (5, 64, 1)
    assert f4 != "float64" and f4 != object()
    with pytest.raises(TypeError, match="element type"):
        tg.dtype("float128")
    with pytest.raises(TypeError):
        tg.dtype(np.dtype(">f4"))                       # big-endian


def test_alloc_is_bytes_and_empty_is_typed(rt):
    with rt.alloc(12) as raw, rt.empty((2, 3), "float32") as typed:
        assert (raw.dtype, raw.shape, raw.nbytes, len(raw)) == ("uint8", (12,), 12, 12)
        assert (typed.dtype, typed.shape, typed.strides, typed.nbytes) == \
            ("float32", (2, 3), (12, 4), 24)
        assert typed.ndim == 2 and typed.size == 6 and typed.itemsize == 4
        assert typed.is_contiguous and typed.base is None
        assert "float32 (2, 3)" in repr(typed) and "12 bytes" in repr(raw)
    with rt.empty(5, np.int16) as one_d:
        assert one_d.shape == (5,) and one_d.nbytes == 10


def test_to_device_keeps_dtype_and_shape(rt):
    host = np.arange(12, dtype=np.float64).reshape(3, 4)
    with rt.to_device(host) as buf:
        assert (buf.dtype, buf.shape) == ("float64", (3, 4))
        assert np.array_equal(buf.to_numpy(), host)
    with rt.to_device(array.array("i", [1, 2, 3])) as ints:
        assert (ints.dtype, ints.shape) == ("int32", (3,))
    with rt.to_device(b"\x01\x00\x02\x00", dtype="uint16") as typed:
        assert typed.to_numpy().tolist() == [1, 2]
    with pytest.raises(ValueError, match="whole number"):
        rt.to_device(b"abc", dtype="uint16")


def test_indexing_and_slicing_make_views(rt):
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    buf = rt.to_device(host)
    row = buf[1]
    assert (row.shape, row.base) == ((6,), buf)
    assert row.ptr == buf.ptr + 6 * 4
    assert np.array_equal(row.to_numpy(), host[1])
    assert buf[2, 3].shape == () and buf[2, 3].item() == 15.0
    assert buf[-1, -1].item() == 23.0
    block = buf[1:3, 2:5]
    assert (block.shape, block.strides, block.is_contiguous) == ((2, 3), (24, 4), False)
    assert block[1, 2].item() == host[2, 4]
    tail = buf[2:]
    assert tail.is_contiguous and np.array_equal(tail.to_numpy(), host[2:])
    every_other = buf[:, ::2]
    assert (every_other.shape, every_other.strides) == ((4, 3), (24, 8))
    assert buf[..., 1].shape == (4,) and buf[1, ...].shape == (6,)
    assert buf[3:1].shape == (0, 6) and buf[3:1].size == 0
    view_of_view = tail[1][2:]
    assert view_of_view.base is buf
    assert np.array_equal(view_of_view.to_numpy(), host[3, 2:])
    with pytest.raises(IndexError):
        buf[4]
    with pytest.raises(IndexError, match="too many"):
        buf[1, 2, 3]
    with pytest.raises(ValueError, match="positive steps"):
        buf[::-1]
    with pytest.raises(TypeError, match="indices"):
        buf[1.5]
    with pytest.raises(TypeError, match="0-d"):
        len(buf[0, 0])
    buf.free()


def test_view_and_reshape(rt):
    with rt.to_device(np.arange(8, dtype=np.int32)) as buf:
        assert buf.reshape(2, 4).shape == (2, 4) == buf.reshape((2, -1)).shape
        assert buf.view("uint8").shape == (32,)
        assert buf.view("int64").shape == (4,)
        assert buf.reshape(2, 4).view(np.int16).shape == (2, 8)
        assert buf.view("float32").reshape(8)[3].view("int32").item() == 3
        with pytest.raises(ValueError, match="cannot reshape"):
            buf.reshape(3, 3)
        with pytest.raises(ValueError, match="multiple"):
            buf[:3].view("int64")
        with pytest.raises(BufferError, match="contiguous"):
            buf[::2].reshape(4)


def test_transfers_read_and_write_a_view_in_place(rt):
    with rt.to_device(np.zeros(10, np.float32)) as buf:
        buf[4:6].upload(np.array([1.5, 2.5], np.float32))
        assert buf.to_numpy().tolist() == [0, 0, 0, 0, 1.5, 2.5, 0, 0, 0, 0]
        assert rt.download_scalar(buf[5], "f") == 2.5
        rt.copy(buf[4:6], buf[0:2])
        assert buf[:2].to_numpy().tolist() == [1.5, 2.5]
        with pytest.raises(ValueError, match="do not fit"):
            buf[4:6].upload(bytes(12))
        with pytest.raises(BufferError, match="contiguous"):
            buf[::2].download(bytearray(20))
        with pytest.raises(BufferError, match="contiguous"):
            rt.download_scalar(buf[::3], "f")


def test_item_reads_every_dtype(rt):
    for name, value in (("bool", True), ("int8", -3), ("uint16", 65535), ("int64", -1 << 40),
                        ("float16", 0.5), ("float64", 1e300), ("complex64", 1 - 2j),
                        ("complex128", 3 + 4j)):
        with rt.to_device(np.array([value], dtype=name)) as buf:
            assert buf[0].item() == value and type(buf.item()) is type(value), name
    with rt.to_device(np.array([1.0], np.float32).view(np.uint16)[1:]) as bf:
        assert bf.view("bfloat16").item() == 1.0           # the high half of 1.0f
    with rt.empty(2, "float32") as two:
        with pytest.raises(ValueError, match="one element"):
            two.item()


def test_double_views_keep_the_memory_alive(double, rt):
    before = double.live(support.TFD_DEVICE_ALLOCS)
    buf = rt.to_device(np.arange(6, dtype=np.float32))
    view = buf[2:4]
    del buf
    gc.collect()
    rt.sync()
    assert double.live(support.TFD_DEVICE_ALLOCS) == before + 1
    assert view.to_numpy().tolist() == [2.0, 3.0]
    del view
    gc.collect()
    rt.sync()
    assert double.live(support.TFD_DEVICE_ALLOCS) == before


def test_only_the_owner_frees_and_then_every_view_refuses(rt):
    buf = rt.empty(4, "float32")
    view = buf[1:]
    with pytest.raises(TypeError, match="view cannot free"):
        view.free()
    with pytest.raises(TypeError, match="view cannot retire"):
        view.retire()
    with pytest.raises(TypeError, match="view cannot free"):
        with view:
            pass
    buf.free()
    assert view.freed and "freed" in repr(view)
    with pytest.raises(ValueError, match="freed"):
        view.ptr
    with pytest.raises(ValueError, match="freed"):
        rt.download_scalar(view, "f")
