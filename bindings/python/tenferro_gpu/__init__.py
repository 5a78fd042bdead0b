# SPDX-License-Identifier: MIT OR Apache-2.0
"""tenferro-gpu for Python: drive one CUDA device's runtime (its primary
context, per-thread stream slots, cuBLAS, transfers, kernels) through
libtenferro_gpu.so.1.

    import numpy as np
    import tenferro_gpu as tg

    if tg.gpu_available():                 # False, never an error, without a GPU
        with tg.Runtime(0) as rt:
            stream = rt.bind_stream()      # one slot, from whichever thread
            with stream:                   # rt's calls use it here
                a = rt.to_device(np.arange(6, dtype=np.float32))   # a DeviceBuffer
                b = a[::2].to_numpy()      # views share the memory
                rt.with_context(lambda: ...)   # the primary context is current
                rt.sync()
            t = torch.from_dlpack(a)       # no copy; also torch.as_tensor(a)

Every failure raises a TenferroError subclass named for its status
(InvalidArgumentError, CudaError, DeviceFaultError, ...) carrying the
library's record: status, operation, call, code, code_domain, message.
See docs/python.md.
"""

from __future__ import annotations

from typing import Optional, Tuple

from . import _capi, blas
from ._capi import MissingFunctionError
from ._dtypes import DType, dtype
from ._library import ENV_LIBRARY, SONAME, LoadError
from .devices import (DeviceProperties, device_count, device_info, devices,
                      gpu_available)
from .errors import (CallbackError, CodeDomain, CompileError, CudaError,
                     DeviceFaultError, DeviceUnavailableError,
                     DriverNotFoundError, DriverStubError, DriverTooOldError,
                     InternalError, InvalidArgumentError, InvalidHandleError,
                     LibraryNotFoundError, NoDeviceError, NotSupportedError,
                     OutOfMemoryError, ProviderError, RuntimeStateError,
                     Status, TenferroError, error_class, error_from_info)
from .host import Completion, HostBuffer, HostPoolStats, HostRegistration
from .kernels import CompileTarget, Kernel, Module, Program
from .log import LogLevel, log_to_logging, set_log_callback
from .buffer import DeviceBuffer
from .graph import Capture, Graph
from .pool import MemoryStats
from .runtime import Capability, Runtime
from .stream import Stream, current_stream
from .stream_work import (Event, PointerMode, RetirementStats, cublas_function,
                          cublas_symbol, cublas_version)

__version__ = "1.2.0"


def library_version() -> Tuple[int, int, int]:
    """Version of the loaded library as (major, minor, patch)."""
    n = int(_capi.api().tf_version())
    return (n // 10000, n // 100 % 100, n % 100)


def library_version_string() -> str:
    """Version of the loaded library as "major.minor.patch"."""
    return str(_capi.api().tf_version_string().decode())


def library_path() -> str:
    """Where the loaded library came from: TENFERRO_GPU_LIBRARY's path, the
    copy bundled in the package, the SONAME (found by the loader's search)
    or pkg-config's libdir path."""
    return _capi.api().where


def speedups_enabled() -> bool:
    """Whether the hot calls (stream, sync, download_scalar, with_context)
    go through the optional C extension (make python-speedups) rather than
    ctypes.  Loads the library."""
    _capi.api()
    return _capi.speedups is not None


def status_string(status: int) -> str:
    """The library's description of a status ("invalid argument")."""
    status = _capi.int32(status, "status")
    return str(_capi.api().tf_status_string(status).decode())


def last_error() -> Optional[TenferroError]:
    """The calling thread's last library error as an (unraised)
    TenferroError, or None.  The binding raises every failure anyway; this
    is for code that mixes in direct C calls.  The binding's own cleanup
    (finalizers, the release of exports) leaves it as it was."""
    info = _capi.last_error_info()
    if info.status == Status.OK:
        return None
    return error_from_info(info.status, info)


def clear_last_error() -> None:
    """Forget the calling thread's last library error."""
    _capi.api().tf_clear_last_error()
    _capi.forget_cleanup_records()


__all__ = [
    "CallbackError", "Capability", "Capture", "CodeDomain", "CompileError",
    "CompileTarget", "Completion", "CudaError", "DType", "DeviceBuffer", "DeviceFaultError",
    "DeviceProperties", "DeviceUnavailableError", "DriverNotFoundError",
    "DriverStubError", "DriverTooOldError", "ENV_LIBRARY", "Event", "Graph", "HostBuffer",
    "HostPoolStats", "HostRegistration",
    "InternalError", "InvalidArgumentError", "InvalidHandleError", "Kernel",
    "LibraryNotFoundError", "LoadError", "LogLevel", "MemoryStats", "MissingFunctionError",
    "Module", "NoDeviceError", "NotSupportedError", "OutOfMemoryError",
    "PointerMode", "Program", "ProviderError", "RetirementStats", "Runtime",
    "RuntimeStateError", "SONAME", "Status", "Stream", "TenferroError", "blas",
    "clear_last_error", "cublas_function", "cublas_symbol", "cublas_version",
    "current_stream", "device_count", "device_info", "devices", "dtype",
    "error_class", "gpu_available",
    "last_error", "library_path", "library_version", "library_version_string",
    "log_to_logging", "set_log_callback", "speedups_enabled", "status_string",
]
