# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the binding's tests need besides the binding: the CUDA driver
double's control interface (tests/cuda_double/tfd_control.h) and the raw
driver, both reached through the libcuda.so.1 the library loaded.

Against the real driver the double's functions do not exist: DOUBLE is None
and tests that need fault injection skip.
"""

import ctypes
import os
from ctypes import c_char_p, c_int, c_long, c_size_t, c_uint, c_ulong, c_void_p

import tenferro_gpu as tg

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MODE = os.environ.get("TF_TEST_MODE", "")

# CUresult values the tests inject.
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_LAUNCH_TIMEOUT = 702
CUDA_ERROR_UNKNOWN = 999
CU_STREAM_NON_BLOCKING = 1
CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115

# enum tfd_kind
TFD_STREAMS = 0
TFD_EVENTS = 1
TFD_DEVICE_ALLOCS = 2
TFD_MODULES = 4
TFD_CUBLAS_HANDLES = 5
TFD_NVRTC_PROGRAMS = 6
TFD_GRAPH_EXECS = 9

# A kernel for NVRTC.  On a GPU it runs as written; the driver double knows
# the name tfd_add_f32 as a built-in that does the same on host memory.
ADD_SOURCE = (
    'extern "C" __global__ void tfd_add_f32(const float *x, const float *y,\n'
    '                                       float *out, unsigned n) {\n'
    '    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n'
    '    if (i < n) out[i] = x[i] + y[i];\n'
    '}\n')


def _driver():
    """The libcuda.so.1 already in the process (the library loads it at its
    first driver call), else the one the loader finds."""
    tg.device_count()            # make the library load its driver first
    try:
        return ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    except OSError:
        return ctypes.CDLL("libcuda.so.1")


class Double:
    """The driver double's tfd_* functions, typed."""

    _PROTOTYPES = {
        "tfd_reset": (None, ()),
        "tfd_set_devices": (None, (c_int,)),
        "tfd_fail": (None, (c_char_p, c_ulong, c_int, c_ulong)),
        "tfd_fail_after": (None, (c_char_p, c_ulong, c_int, c_ulong)),
        "tfd_calls": (c_ulong, (c_char_p,)),
        "tfd_live": (c_long, (c_int,)),
        "tfd_primary_refcount": (c_int, (c_int,)),
        "tfd_primary_context": (c_void_p, (c_int,)),
        "tfd_current_context": (c_void_p, ()),
        "tfd_set_current": (None, (c_void_p,)),
        "tfd_create_context": (c_void_p, (c_int,)),
        "tfd_destroy_context": (None, (c_void_p,)),
        "tfd_poison_context": (None, (c_void_p, c_int)),
        "tfd_stream_flags": (c_uint, (c_void_p,)),
        "tfd_stream_context": (c_void_p, (c_void_p,)),
        "tfd_capture_nodes": (c_ulong, (c_void_p,)),
        "tfd_log_clear": (None, ()),
        "tfd_log_format": (c_size_t, (c_char_p, c_size_t, c_size_t)),
        "tfd_set_async_pending": (None, (c_int,)),
        "tfd_complete_all": (None, ()),
        "tfd_func_attribute": (c_int, (c_void_p, c_int)),
        "tfd_cublas_stream": (c_void_p, (c_void_p,)),
        "tfd_set_attribute": (None, (c_int, c_int, c_int)),
        "tfd_pending": (c_ulong, (c_void_p,)),
        "tfd_set_execution": (None, (c_int,)),
        "tfd_drain_all": (None, ()),
    }

    def __init__(self, lib):
        for name, (restype, argtypes) in self._PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, list(argtypes)
            setattr(self, name[4:], fn)

    def inject(self, entry, nth, code, times=1):
        self.fail(entry.encode(), nth, code, times)

    def inject_after(self, entry, nth, code, times=1):
        self.fail_after(entry.encode(), nth, code, times)

    def call_count(self, entry):
        return self.calls(entry.encode())

    def call_log(self):
        buf = ctypes.create_string_buffer(4096)
        self.log_format(buf, len(buf), 0)
        return buf.value.decode()


def _find_double(lib):
    try:
        lib.tfd_reset
    except AttributeError:
        return None
    return Double(lib)


_LIB = _driver()
DOUBLE = _find_double(_LIB)


class RawDriver:
    """The calling thread's current context through whichever driver is
    loaded; the double's own helpers when it is the double, so its call log
    and counters stay untouched."""

    def __init__(self, lib, double):
        self.double = double
        if double is not None:
            return
        gpa = lib.cuGetProcAddress_v2
        gpa.restype = c_int
        gpa.argtypes = [c_char_p, ctypes.POINTER(c_void_p), c_int,
                        ctypes.c_uint64, ctypes.POINTER(c_int)]

        def entry(name, version, cfunctype):
            fn = c_void_p()
            assert gpa(name.encode(), ctypes.byref(fn), version, 1, None) == 0, name
            return cfunctype(fn.value)
        ptr = ctypes.POINTER(c_void_p)
        self._get = entry("cuCtxGetCurrent", 4000, ctypes.CFUNCTYPE(c_int, ptr))
        self._set = entry("cuCtxSetCurrent", 4000, ctypes.CFUNCTYPE(c_int, c_void_p))
        self._create = entry("cuCtxCreate", 12050,
                             ctypes.CFUNCTYPE(c_int, ptr, c_void_p, c_uint, c_int))
        self._destroy = entry("cuCtxDestroy", 4000, ctypes.CFUNCTYPE(c_int, c_void_p))

    def current(self):
        if self.double is not None:
            return self.double.current_context()
        ctx = c_void_p()
        assert self._get(ctypes.byref(ctx)) == 0
        return ctx.value

    def set_current(self, ctx):
        if self.double is not None:
            self.double.set_current(ctx)
        else:
            assert self._set(ctx) == 0

    def create_context(self):
        """A non-primary context on device 0, not left current."""
        if self.double is not None:
            return self.double.create_context(0)
        before = self.current()
        ctx = c_void_p()
        assert self._create(ctypes.byref(ctx), None, 0, 0) == 0
        self.set_current(before)
        return ctx.value

    def destroy_context(self, ctx):
        if self.double is not None:
            self.double.destroy_context(ctx)
        else:
            assert self._destroy(ctx) == 0


RAW = RawDriver(_LIB, DOUBLE)


def header_version():
    """(major, minor, patch) from include/tenferro_gpu.h."""
    parts = {}
    with open(os.path.join(REPO, "include", "tenferro_gpu.h")) as f:
        for line in f:
            for part in ("MAJOR", "MINOR", "PATCH"):
                prefix = f"#define TF_VERSION_{part} "
                if line.startswith(prefix):
                    parts[part] = int(line[len(prefix):].split()[0])
    return parts["MAJOR"], parts["MINOR"], parts["PATCH"]


def loaded_library_file():
    """Real path of the libtenferro_gpu.so.1 mapped into this process."""
    tg.library_version()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split(None, 5)[-1].strip()
            if os.path.basename(path).startswith("libtenferro_gpu.so"):
                return os.path.realpath(path)
    raise AssertionError("libtenferro_gpu is not mapped")


def torch_external_stream(torch, ptr, device=None):
    """A torch stream over the CUstream `ptr`: torch.cuda.ExternalStream,
    or get_stream_from_external where a newer PyTorch only has that."""
    if hasattr(torch.cuda, "ExternalStream"):
        return torch.cuda.ExternalStream(ptr, device=device)
    return torch.cuda.get_stream_from_external(ptr, device=device)


class ForeignLibrary:
    """What another CUDA library (PyTorch, CuPy) does to the device, through
    the raw driver in `rt`'s primary context: its own non-blocking stream,
    and copies queued there.  Against the double, work queued on a stream
    runs only when that stream is made to progress (deferred mode), so a
    read that is not ordered after a write sees the old bytes."""

    _ENTRIES = {
        "cuStreamCreate": (2000, (ctypes.POINTER(c_void_p), c_uint)),
        "cuStreamDestroy": (4000, (c_void_p,)),
        "cuStreamSynchronize": (2000, (c_void_p,)),
        "cuMemcpyHtoDAsync": (3020, (ctypes.c_uint64, c_void_p, c_size_t, c_void_p)),
        "cuMemcpyDtoHAsync": (3020, (c_void_p, ctypes.c_uint64, c_size_t, c_void_p)),
    }

    def __init__(self, rt):
        self.rt = rt
        gpa = _LIB.cuGetProcAddress_v2
        gpa.restype = c_int
        gpa.argtypes = [c_char_p, ctypes.POINTER(c_void_p), c_int, ctypes.c_uint64, c_void_p]
        self._fn = {}
        for name, (version, argtypes) in self._ENTRIES.items():
            address = c_void_p()
            assert gpa(name.encode(), ctypes.byref(address), version, 1, None) == 0, name
            self._fn[name] = ctypes.CFUNCTYPE(c_int, *argtypes)(address.value)

    def _call(self, name, *args):
        rc = self.rt.with_context(self._fn[name], *args)
        assert rc == 0, f"{name} returned {rc}"

    def new_stream(self):
        out = c_void_p()
        self._call("cuStreamCreate", ctypes.byref(out), CU_STREAM_NON_BLOCKING)
        return out.value

    def destroy_stream(self, stream):
        self._call("cuStreamDestroy", stream)

    def write(self, stream, dptr, data):
        """Queue a copy of `data` (staged at the call) to dptr on `stream`."""
        self._call("cuMemcpyHtoDAsync", dptr, data, len(data), stream)

    def read(self, stream, dptr, n):
        """n bytes at dptr, read on `stream` (then synchronized)."""
        out = ctypes.create_string_buffer(n)
        self._call("cuMemcpyDtoHAsync", out, dptr, n, stream)
        self._call("cuStreamSynchronize", stream)
        return out.raw


class CudaArray:
    """Another library's device array that offers only the CUDA Array
    Interface (version 3 with `stream`, or older without)."""

    def __init__(self, ptr, shape, typestr="|u1", stream=None, version=3, strides=None,
                 readonly=False):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly),
            "strides": strides, "version": version}
        if version >= 3:
            self.__cuda_array_interface__["stream"] = stream


class DLPackArray:
    """Another library's device array that offers only DLPack: it hands out
    the capsules of a DeviceBuffer it wraps, and records what it was asked."""

    def __init__(self, buf, device=None):
        self.buf = buf
        self.requests = []
        self.device = device

    def __dlpack_device__(self):
        return self.device or self.buf.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self.requests.append(kwargs)
        return self.buf.__dlpack__(**kwargs)


class TensorLike:
    """A torch.Tensor's kind of DLPack producer: each __dlpack__ hands out a
    versioned capsule of one static tensor over `buf` (float32 or float64,
    C order unless `strides` (elements) are given) whose deleter counts
    its calls in `deleted`."""

    def __init__(self, buf, shape, bits=32, strides=None, read_only=False, code=2):
        from tenferro_gpu import _dlpack
        self.deleted = 0
        self._dlpack = _dlpack
        self._deleter = _dlpack.DELETER(self._delete)
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(shape))(*strides) if strides else None
        self._managed = m = _dlpack.DLManagedTensorVersioned()
        m.version.major, m.version.minor = _dlpack.VERSION
        m.deleter = self._deleter
        m.flags = _dlpack.FLAG_READ_ONLY if read_only else 0
        t = m.dl_tensor
        t.data, t.device.device_type, t.device.device_id = buf.ptr, _dlpack.KDL_CUDA, 0
        t.ndim, t.shape = len(shape), self._shape
        t.strides = self._strides
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
        self.requests = 0

    def _delete(self, address):
        self.deleted += 1

    def __dlpack_device__(self):
        return (self._dlpack.KDL_CUDA, 0)

    def __dlpack__(self, stream=None, max_version=None):
        self.requests += 1
        return self._dlpack.capsule_new(ctypes.addressof(self._managed),
                                        self._dlpack.NAME_VERSIONED, None)
