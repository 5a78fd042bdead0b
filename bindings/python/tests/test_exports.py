# SPDX-License-Identifier: MIT OR Apache-2.0
"""A DeviceBuffer's memory stays while a consumer holds it: a DLPack tensor
until its deleter runs, an object read through __cuda_array_interface__
until it is garbage; free(), the end of a `with` block and retire() wait
for them ("NOTE memory is freed once" in tenferro_gpu/_claims.py).  And
the capsule's destructor keeps the exception a consumer has pending."""

import ctypes
import gc

import pytest

import tenferro_gpu as tg
from tenferro_gpu import _interop
import support
from test_array_protocols import FakeConsumer


def _allocs(double, rt=None):
    """Live device allocations, once the frees queued so far have run (the
    double runs a stream-ordered free when its stream runs)."""
    gc.collect()
    if rt is not None:
        rt.sync()           # runs the retirements' releases, which queue frees
        rt.sync()           # runs those frees
    return double.live(support.TFD_DEVICE_ALLOCS)


def _read(rt, address, n):
    out = ctypes.create_string_buffer(n)
    rt.download(address, out)
    return out.raw


def test_a_with_block_leaves_the_memory_to_the_dlpack_consumer(double, rt):
    allocs = _allocs(double)
    with rt.alloc(64) as buf:
        buf.upload(b"\x42" * 64)
        consumer = FakeConsumer(buf)             # renamed "used_dltensor"
    assert buf.freed
    with pytest.raises(ValueError, match="freed"):
        buf.ptr
    assert _allocs(double, rt) == allocs + 1         # the tensor still holds it
    assert _read(rt, consumer.data, 64) == b"\x42" * 64
    consumer.release()                           # the consumer's deleter
    assert _allocs(double, rt) == allocs


def test_free_waits_for_every_tensor_of_every_view(double, rt):
    allocs = _allocs(double)
    buf = rt.alloc(64)
    whole, part = FakeConsumer(buf), FakeConsumer(buf[8:16])
    buf.free()
    assert _allocs(double, rt) == allocs + 1
    whole.release()
    assert _allocs(double, rt) == allocs + 1
    part.release()
    assert _allocs(double, rt) == allocs


def test_retire_waits_for_the_tensor_too(double, rt):
    allocs = _allocs(double)
    buf = rt.alloc(64)
    consumer = FakeConsumer(buf)
    buf.retire()
    assert _allocs(double, rt) == allocs + 1     # its release ran in the sync
    consumer.release()
    assert _allocs(double, rt) == allocs


def test_an_object_read_through_the_interface_keeps_the_memory(double, rt):
    allocs = _allocs(double)

    class Consumer:
        """What torch.as_tensor(buf) and cupy.asarray(buf) do: keep the
        object whose interface they read, and use its pointer."""
        def __init__(self, obj):
            self.obj = obj
            self.data = obj.__cuda_array_interface__["data"][0]

    with rt.alloc(32) as buf:
        buf.upload(b"\x07" * 32)
        consumer = Consumer(buf[16:])
    assert _allocs(double, rt) == allocs + 1
    assert _read(rt, consumer.data, 16) == b"\x07" * 16
    del consumer
    assert _allocs(double, rt) == allocs


def test_without_a_consumer_free_is_immediate(double, rt):
    allocs = _allocs(double)
    buf = rt.alloc(64)
    capsule = buf.__dlpack__()
    del capsule                                  # never consumed
    buf.free()
    assert _allocs(double, rt) == allocs
    assert _interop.live_exports() == 0


def test_a_failing_dlpack_consumer_raises_its_own_error(rt):
    np = pytest.importorskip("numpy")
    if not hasattr(np, "from_dlpack"):
        pytest.skip("numpy.from_dlpack needs NumPy 1.22")
    exports = _interop.live_exports()
    with rt.alloc(16) as buf:
        # NumPy takes host memory only: it drops the capsule, unconsumed,
        # with its error set; the destructor must leave that error alone.
        with pytest.raises(Exception) as e:
            np.from_dlpack(buf)
        assert not isinstance(e.value, SystemError), repr(e.value)
        assert "device" in str(e.value).lower()
    assert _interop.live_exports() == exports    # the tensor was deleted
