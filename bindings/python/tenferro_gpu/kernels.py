# SPDX-License-Identifier: MIT OR Apache-2.0
"""Modules, kernels and NVRTC programs (include/tenferro_gpu.h, tf_module_*,
tf_kernel_launch, tf_program_*).

    program = rt.compile(SOURCE)              # NVRTC, for the runtime's device
    with program, rt.load_module(program) as module:
        add = module.function("add")          # an extern "C" kernel
        rt.launch(add, grid=(n + 255) // 256, block=256,
                  args=(x, y, out, ctypes.c_uint32(n)))

Program, Module and Kernel each own one reference of the library's object
and release it on close() (or leaving a `with` block, or garbage
collection).  A Kernel keeps its module loaded; a module keeps its runtime
alive.
"""

from __future__ import annotations

import ctypes
import enum
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple, Union

from . import _capi, _foreign, errors
from . import pool as _pool
from ._owned import Owned
from .buffer import DeviceBuffer

if TYPE_CHECKING:
    from .runtime import Runtime


class CompileTarget(enum.IntEnum):
    """enum tf_compile_target"""
    PTX = 0      # PTX text for compute_XY, JIT-compiled by load_module
    CUBIN = 1    # a CUBIN for sm_XY, loaded without JIT


def _program_release() -> Any:
    """What drops a Program's reference: tf_program_release_checked (1.1),
    whose status close() raises, or on a 1.0 library tf_program_release
    (no status: close() then cannot fail)."""
    a = _capi.api()
    checked = a.tf_program_release_checked
    return a.tf_program_release if isinstance(checked, _capi._Missing) else checked


class Program(Owned):
    """The result of Runtime.compile(): NVRTC's image and log (tf_program).

    Each Program owns one reference; clone() (or copy.copy) adds another,
    and the image and log stay until the last is closed.  close() raises
    the library's error if the release is refused (the handle was already
    released behind the binding's back); closing twice is a no-op."""

    __slots__ = ()
    _kind = "Program"

    def __init__(self, handle: int) -> None:
        self._own(handle, _program_release())

    def clone(self) -> "Program":
        """Another Program on the same image and log, with its own reference
        (tf_program_retain, new in 1.1: MissingFunctionError on a 1.0
        library).  Raises ValueError once closed."""
        _capi.check(_capi.api().tf_program_retain(self._ref()))
        try:
            return Program(self._handle)
        except BaseException:
            _program_release()(self._handle)
            raise

    __copy__ = clone

    @property
    def image(self) -> bytes:
        """The compiled image (PTX text with its NUL byte, or a CUBIN) as
        bytes; give it (or the Program) to Runtime.load_module."""
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        ref = self._ref()        # held while the image is copied
        try:
            st = _capi.api().tf_program_image(ref, ctypes.byref(data), ctypes.byref(size))
            image = ctypes.string_at(data.value or 0, size.value) if st == 0 else b""
        finally:
            del ref
        _capi.check(st)
        return image

    @property
    def log(self) -> str:
        """NVRTC's log ("" when it wrote none)."""
        out = ctypes.c_char_p()
        ref = self._ref()        # held while the log is copied
        try:
            st = _capi.api().tf_program_log(ref, ctypes.byref(out))
            text = (out.value or b"") if st == 0 else b""
        finally:
            del ref
        _capi.check(st)
        return text.decode("utf-8", "replace")


class Module(Owned):
    """A loaded module (tf_module) of one runtime."""

    __slots__ = ()
    _kind = "Module"

    def __init__(self, handle: int) -> None:
        self._own(handle, _capi.api().tf_module_release)

    def function(self, name: str) -> "Kernel":
        """The kernel `name` as the image names it (the plain name for an
        extern "C" kernel).  Raises CudaError (CUDA_ERROR_NOT_FOUND) when
        the image has no such kernel."""
        out = ctypes.c_void_p()
        _capi.check(_capi.api().tf_module_function(self._ref(), name.encode(),
                                                   ctypes.byref(out)))
        return Kernel(self, name, out.value or 0)


def _release_kernel_module(module_handle: int) -> int:
    return int(_capi.api().tf_module_release(module_handle))


class Kernel(Owned):
    """A kernel (CUfunction) of a Module.  It holds its own reference to the
    module (tf_module_retain), so it stays valid after the Module closes."""

    __slots__ = ("name", "_function")
    _kind = "Kernel"

    name: str
    _function: int

    def __init__(self, module: Module, name: str, function: int) -> None:
        _capi.check(_capi.api().tf_module_retain(module._ref()))
        self.name, self._function = name, function
        self._own(module._handle, _release_kernel_module)

    @property
    def function(self) -> int:
        """The CUfunction as an integer (borrowed)."""
        self.handle
        return self._function

    def set_attribute(self, attribute: int, value: int) -> None:
        """cuFuncSetAttribute (tf_function_set_attribute): e.g. attribute 8,
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES."""
        attribute = _capi.int32(attribute, "attribute")
        value = _capi.int32(value, "value")
        _capi.check(_capi.api().tf_function_set_attribute(self._ref(), self._function,
                                                          attribute, value))

    def __repr__(self) -> str:
        return f"<tenferro_gpu.Kernel {self.name!r}{' (closed)' if self.closed else ''}>"


Dims = Union[int, Sequence[int]]


def _dims(value: Dims, name: str) -> Tuple[int, int, int]:
    """(x, y, z) from an int or a tuple of 1 to 3 ints."""
    given = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(given) <= 3:
        raise ValueError(f"{name} has 1 to 3 dimensions, got {len(given)}")
    dims = tuple(_capi.uint32(d, name) for d in given) + (1,) * (3 - len(given))
    return dims[0], dims[1], dims[2]


def _argument(runtime: "Runtime", value: Any,
              borrowed: List[_foreign.Foreign]) -> Any:
    """A ctypes object holding one kernel parameter's bytes; device memory
    of another library is appended to `borrowed`."""
    if isinstance(value, DeviceBuffer):
        return ctypes.c_uint64(value.ptr)
    if isinstance(value, (ctypes._SimpleCData, ctypes.Structure, ctypes.Array)):
        return value
    if hasattr(value, "dtype") and getattr(value, "shape", None) == () and hasattr(value, "tobytes"):
        return ctypes.create_string_buffer(value.tobytes())   # a NumPy scalar
    if _foreign.has_protocol(value):
        pointer, foreign = _foreign.pointer_argument(runtime, value)
        borrowed.append(foreign)
        return pointer
    raise TypeError(
        f"kernel argument {value!r}: give its C type, e.g. ctypes.c_uint32(n), "
        f"ctypes.c_float(x), numpy.float32(x), ctypes.c_uint64(address), a "
        f"DeviceBuffer or another library's device array (a plain "
        f"{type(value).__name__} has no C type)")


class KernelsMixin:
    """Runtime methods for NVRTC, modules and launches."""

    __slots__ = ()

    if TYPE_CHECKING:
        def _active(self) -> int: ...

    def compile(self, source: Union[str, bytes], *, target: int = CompileTarget.PTX,
                arch: int = 0, options: Sequence[Union[str, bytes]] = (),
                name: Optional[str] = None) -> Program:
        """Compile CUDA C++ `source` with NVRTC for this runtime's device (or
        `arch`, 10 * major + minor) and return its Program.  Kernels to be
        found by their plain name must be extern "C".  `options` are further
        NVRTC options ("-std=c++17", "-I/path").  Raises CompileError, whose
        `log` attribute has NVRTC's whole log, when NVRTC rejects the source;
        LibraryNotFoundError when NVRTC cannot be loaded."""
        api = _capi.api()
        opts = _capi.new_struct(_capi.CompileOptionsStruct, api.tf_compile_options_init)
        opts.target = _capi.int32(target, "target")
        opts.arch = _capi.int32(arch, "arch")
        encoded = [o.encode() if isinstance(o, str) else bytes(o) for o in options]
        array = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
        opts.option_count = len(encoded)
        opts.options = ctypes.cast(array, ctypes.POINTER(ctypes.c_char_p)) if encoded else None
        opts.name = name.encode() if name is not None else None
        text = source.encode() if isinstance(source, str) else source
        out = ctypes.c_void_p()
        st = api.tf_program_compile(self._active(), text, ctypes.byref(opts), ctypes.byref(out))
        if st == errors.Status.COMPILE:
            failure: Optional[errors.TenferroError] = errors.error_from_info(
                st, _capi.last_error_info(st))
            with Program(out.value or 0) as program:
                setattr(failure, "log", program.log)
            assert failure is not None
            try:
                raise failure
            finally:
                failure = None      # no frame -> exception cycle
        _capi.check(st)
        return Program(out.value or 0)

    def load_module(self, image: Union[Program, bytes]) -> Module:
        """Load a module image (a Program, or PTX / CUBIN / fatbin bytes) into
        the runtime's primary context (tf_module_load)."""
        if isinstance(image, Program):
            image = image.image
        data = bytes(image)
        out = ctypes.c_void_p()
        _capi.check(_capi.api().tf_module_load(self._active(), data, len(data),
                                               ctypes.byref(out)))
        return Module(out.value or 0)

    def launch(self, kernel: Kernel, grid: Dims, block: Dims, args: Sequence[Any] = (), *,
               shared_memory_bytes: int = 0) -> None:
        """Queue `kernel` on this thread's slot stream (tf_kernel_launch).
        grid and block are an int or a tuple of up to 3 ints; args gives each
        kernel parameter with its C type (ctypes values, NumPy scalars;
        DeviceBuffers and other libraries' device arrays for pointers: see
        _foreign.py for how those are ordered and kept).  Returns once
        queued; a fault in the kernel shows up in later calls as
        DeviceFaultError."""
        api = _capi.api()
        config = _capi.new_struct(_capi.LaunchConfigStruct, api.tf_launch_config_init)
        config.grid_x, config.grid_y, config.grid_z = _dims(grid, "grid")
        config.block_x, config.block_y, config.block_z = _dims(block, "block")
        config.shared_memory_bytes = _capi.uint32(shared_memory_bytes, "shared_memory_bytes")
        borrowed: List[_foreign.Foreign] = []
        rt: Any = self
        kref = kernel._ref()      # the module stays loaded for the call
        try:
            values = [_argument(rt, a, borrowed) for a in args]
            pointers = (ctypes.c_void_p * max(len(values), 1))(
                *[ctypes.addressof(v) for v in values])
            _capi.check(api.tf_kernel_launch(self._active(), kernel._function,
                                             ctypes.byref(config),
                                             pointers if values else None))
            _pool.record_uses(rt, *args)
        finally:
            del kref
            for foreign in borrowed:
                foreign.done(rt, queued=True)
