# SPDX-License-Identifier: MIT OR Apache-2.0
"""The array protocols, both ways, against the driver double.

Producer: DeviceBuffer.__cuda_array_interface__ (version 3, with stream)
and __dlpack__ / __dlpack_device__, checked by a consumer written here from
dlpack.h and the CUDA Array Interface description (its own ctypes structs,
not the binding's), including the stream ordering the consumer is owed.

Consumer: objects of "another library" that offer only one protocol are
taken wherever the binding takes a device address."""

import ctypes
import gc
from ctypes import POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p

import pytest

import tenferro_gpu as tg
from tenferro_gpu import _interop
import support

np = pytest.importorskip("numpy")
DATA = bytes(range(1, 33))


# ---- dlpack.h, as a consumer reads it ---------------------------------------

class Device(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class Tensor(Structure):
    _fields_ = [("data", c_void_p), ("device", Device), ("ndim", c_int32),
                ("dtype", DataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class Managed(Structure):
    _fields_ = [("dl_tensor", Tensor), ("manager_ctx", c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, c_void_p))]


class Versioned(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32), ("manager_ctx", c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, c_void_p)), ("flags", c_uint64),
                ("dl_tensor", Tensor)]


_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype, _name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_pointer.restype, _pointer.argtypes = c_void_p, [ctypes.py_object, ctypes.c_char_p]
_set_name = ctypes.pythonapi.PyCapsule_SetName
_set_name.restype, _set_name.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_USED = b"used_dltensor"
_USED_VERSIONED = b"used_dltensor_versioned"


class FakeConsumer:
    """The consumer side of DLPack, as torch.from_dlpack does it: ask for
    the device, then a capsule for its stream, take the tensor (rename the
    capsule) and call the deleter when done with it."""

    def __init__(self, producer, stream=None, max_version=None):
        self.device = producer.__dlpack_device__()
        kwargs = {"stream": stream}
        if max_version is not None:
            kwargs["max_version"] = max_version
        capsule = producer.__dlpack__(**kwargs)
        self.name = _name(capsule)
        self.versioned = self.name == b"dltensor_versioned"
        address = _pointer(capsule, self.name)
        self.managed = (Versioned if self.versioned else Managed).from_address(address)
        _set_name(capsule, _USED_VERSIONED if self.versioned else _USED)
        self.address = address
        t = self.managed.dl_tensor
        self.data = (t.data or 0) + t.byte_offset
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        self.strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
        self.dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
        self.tensor_device = (t.device.device_type, t.device.device_id)
        self.byte_offset = t.byte_offset
        self.aligned_data = t.data

    def release(self):
        self.managed.deleter(self.address)


def test_dlpack_describes_the_buffer_and_its_views(rt):
    buf = rt.to_device(np.arange(24, dtype=np.float32).reshape(4, 6))
    assert buf.__dlpack_device__() == (2, 0)                # kDLCUDA, ordinal 0
    whole = FakeConsumer(buf)
    assert (whole.name, whole.shape, whole.strides, whole.dtype) == \
        (b"dltensor", (4, 6), (6, 1), (2, 32, 1))
    assert whole.data == buf.ptr and whole.byte_offset == 0
    view = buf[1:3, 1::2]
    part = FakeConsumer(view)
    assert (part.shape, part.strides) == ((2, 3), (6, 2))
    assert part.data == view.ptr
    assert part.aligned_data == buf.ptr and part.byte_offset == view.ptr - buf.ptr
    scalar = FakeConsumer(buf[3, 5])
    assert scalar.shape == () and scalar.data == buf.ptr + 23 * 4
    for consumer in (whole, part, scalar):
        consumer.release()
    buf.free()


def test_dlpack_versioned_when_the_consumer_asks(rt):
    with rt.empty((2,), "complex128") as buf:
        c = FakeConsumer(buf, max_version=(1, 1))
        assert c.name == b"dltensor_versioned" and c.versioned
        assert (c.managed.major, c.managed.minor, c.managed.flags) == (1, 0, 0)
        assert c.dtype == (5, 128, 1) and c.data == buf.ptr
        c.release()
        old = FakeConsumer(buf, max_version=(0, 8))          # asks for the old struct
        assert old.name == b"dltensor"
        old.release()


def test_the_capsule_keeps_the_memory_until_the_deleter(double, rt):
    allocs = double.live(support.TFD_DEVICE_ALLOCS)
    exports = _interop.live_exports()
    buf = rt.to_device(np.arange(4, dtype=np.float32))
    consumer = FakeConsumer(buf[1:])
    del buf
    gc.collect()
    rt.sync()
    assert double.live(support.TFD_DEVICE_ALLOCS) == allocs + 1
    assert _interop.live_exports() == exports + 1
    out = ctypes.create_string_buffer(12)
    rt.download(consumer.data, out)                          # still valid memory
    assert np.frombuffer(out.raw, np.float32).tolist() == [1.0, 2.0, 3.0]
    consumer.release()
    gc.collect()
    rt.sync()
    assert _interop.live_exports() == exports
    assert double.live(support.TFD_DEVICE_ALLOCS) == allocs


def test_an_unconsumed_capsule_deletes_its_tensor(double, rt):
    exports = _interop.live_exports()
    with rt.empty(4, "int32") as buf:
        capsule = buf.__dlpack__()
        versioned = buf.__dlpack__(max_version=(1, 0))
        assert _interop.live_exports() == exports + 2
        del capsule, versioned
        gc.collect()
        assert _interop.live_exports() == exports


def test_dlpack_orders_the_consumers_stream_after_the_buffers(double, rt):
    foreign = support.ForeignLibrary(rt)
    theirs = foreign.new_stream()
    buf = rt.to_device(bytes(32))
    rt.sync()
    buf.upload(DATA)                        # queued on this thread's slot, not run
    # Without ordering (stream -1), the consumer's stream reads old bytes ...
    unordered = FakeConsumer(buf, stream=-1)
    assert foreign.read(theirs, unordered.data, 32) == bytes(32)
    unordered.release()
    # ... with the consumer's stream, the producer makes it wait: no host wait.
    ordered = FakeConsumer(buf, stream=theirs)
    assert double.pending(rt.stream()) >= 1     # the slot's work is still queued
    assert foreign.read(theirs, ordered.data, 32) == DATA
    ordered.release()
    buf.upload(DATA[::-1])
    legacy = FakeConsumer(buf)              # None: the legacy default stream
    assert foreign.read(1, legacy.data, 32) == DATA[::-1]
    legacy.release()
    foreign.destroy_stream(theirs)
    buf.free()


def test_dlpack_refuses_what_it_cannot_do(rt):
    with rt.empty(4, "float32") as buf:
        with pytest.raises(ValueError, match="ambiguous"):
            buf.__dlpack__(stream=0)
        with pytest.raises(TypeError, match="stream"):
            buf.__dlpack__(stream="1")
        with pytest.raises(BufferError, match="device"):
            buf.__dlpack__(dl_device=(1, 0))
        buf.__dlpack__(dl_device=(2, 0), copy=False)


def test_dlpack_copy_true_gives_new_memory(rt):
    with rt.to_device(np.arange(4, dtype=np.int32)) as buf:
        c = FakeConsumer(_CopyAsking(buf), max_version=(1, 0))
        assert c.data != buf.ptr and c.managed.flags & 2    # DLPACK_FLAG_BITMASK_IS_COPIED
        out = np.empty(4, np.int32)
        rt.download(c.data, out)
        assert out.tolist() == [0, 1, 2, 3]
        c.release()


class _CopyAsking:
    def __init__(self, buf):
        self.buf = buf

    def __dlpack_device__(self):
        return self.buf.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.buf.__dlpack__(copy=True, **kwargs)


def test_cuda_array_interface_version_3(rt):
    with rt.to_device(np.arange(24, dtype=np.int16).reshape(4, 6)) as buf:
        cai = buf.__cuda_array_interface__
        assert cai["version"] == 3 and cai["typestr"] == "<i2" and cai["shape"] == (4, 6)
        assert cai["data"] == (buf.ptr, False) and cai["strides"] is None
        assert cai["stream"] == rt.stream()
        view = buf[1:, ::3].__cuda_array_interface__
        assert view["strides"] == (12, 6) and view["data"][0] == buf.ptr + 12
        own = rt.stream()
        stream = rt.bind_stream(rt.current_slot ^ 1)
        with stream:
            assert buf.__cuda_array_interface__["stream"] == stream.ptr != own
    with rt.empty(2, "bfloat16") as bf:
        assert not hasattr(bf, "__cuda_array_interface__")   # DLPack only
        FakeConsumer(bf).release()


# ---- the binding as a consumer --------------------------------------------

def test_objects_with_only_dlpack_are_device_memory(double, rt):
    exports = _interop.live_exports()
    with rt.to_device(np.zeros(8, np.uint8)) as a, rt.to_device(np.zeros(8, np.uint8)) as b:
        theirs_a, theirs_b = support.DLPackArray(a), support.DLPackArray(b)
        rt.upload(DATA[:8], theirs_a)
        assert bytes(rt.download(theirs_a, bytearray(8))) == DATA[:8]
        assert rt.download_scalar(theirs_a, "B", offset=2) == 3
        rt.copy(theirs_a, theirs_b)
        assert bytes(b.download()) == DATA[:8]
        # the producer was asked for this slot's stream
        assert theirs_a.requests[0]["stream"] == rt.stream()
        rt.sync()                         # runs the retirements of queued uses
        assert _interop.live_exports() == exports
        with pytest.raises(ValueError, match="do not fit"):
            rt.upload(bytes(9), theirs_a)
        assert _interop.live_exports() == exports


def test_double_a_failed_call_reports_its_own_error_and_still_releases(double, rt):
    exports = _interop.live_exports()
    with rt.to_device(bytes(8)) as buf:
        theirs = support.DLPackArray(buf)
        double.inject("cuMemcpyHtoDAsync", 1, support.CUDA_ERROR_UNKNOWN)
        with pytest.raises(tg.CudaError) as e:
            rt.upload(DATA[:8], theirs)
        assert (e.value.operation, e.value.call) == ("tf_upload", "cuMemcpyHtoDAsync")
        double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
        with pytest.raises(tg.CudaError) as e:
            rt.download_scalar(theirs, "B")
        # the record is the scalar read's, not that of the release after it
        assert (e.value.operation, e.value.call) == ("tf_download_scalar",
                                                     "cuStreamSynchronize")
        rt.sync()
        assert _interop.live_exports() == exports


def test_host_memory_with_dlpack_is_refused(rt):
    host = np.zeros(4, np.uint8)
    with pytest.raises(TypeError, match="DLPack device type 1"):
        rt.copy(host, host, 4)


def test_objects_with_only_the_interface_are_device_memory(double, rt):
    foreign = support.ForeignLibrary(rt)
    theirs = foreign.new_stream()
    with rt.to_device(bytes(32)) as backing, rt.empty(32, "uint8") as out:
        rt.sync()
        foreign.write(theirs, backing.ptr, DATA)           # queued on their stream
        # Version 2, no stream: nothing says to wait, and the copy sees old bytes.
        rt.copy(support.CudaArray(backing.ptr, (32,), version=2), out)
        assert bytes(out.download()) == bytes(32)
        # Version 3 with their stream: this slot waits for it on the device.
        array = support.CudaArray(backing.ptr, (8,), typestr="<u4", stream=theirs)
        rt.copy(array, out)
        assert bytes(out.download()) == DATA
        assert rt.download_scalar(array, "I", offset=4) == int.from_bytes(DATA[4:8], "little")
        with pytest.raises(TypeError, match="read-only"):
            rt.upload(DATA, support.CudaArray(backing.ptr, (32,), readonly=True))
        with pytest.raises(BufferError, match="not contiguous"):
            rt.copy(support.CudaArray(backing.ptr, (4, 4), strides=(8, 1)), out, 16)
        with pytest.raises(ValueError, match="ambiguous"):
            rt.copy(support.CudaArray(backing.ptr, (32,), stream=0), out)
    foreign.destroy_stream(theirs)


def test_kernels_and_gemm_take_other_libraries_arrays(double, rt):
    x, y = np.arange(8, dtype=np.float32), np.full(8, 2.0, np.float32)
    with rt.to_device(x) as dx, rt.to_device(y) as dy, rt.empty(8, "float32") as dout, \
            rt.compile(support.ADD_SOURCE) as program, rt.load_module(program) as module:
        add = module.function("tfd_add_f32")
        rt.launch(add, grid=1, block=8,
                  args=(support.DLPackArray(dx), support.CudaArray(dy.ptr, (8,), "<f4"),
                        dout, ctypes.c_uint32(8)))
        assert dout.to_numpy().tolist() == (x + y).tolist()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    with rt.to_device(a) as da, rt.to_device(b) as db, rt.empty((2, 4), "float32") as dc:
        tg.blas.matmul(rt, support.DLPackArray(da), db,
                       support.CudaArray(dc.ptr, (2, 4), "<f4"), 2, 4, 3)
        assert np.allclose(dc.to_numpy(), a @ b)
        with pytest.raises(ValueError, match="needs 32 bytes; the CudaArray has 8"):
            tg.blas.matmul(rt, da, db, support.CudaArray(dc.ptr, (8,), "<u1"), 2, 4, 3)
