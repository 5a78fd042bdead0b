# SPDX-License-Identifier: MIT OR Apache-2.0
"""Ordering a stream the library does not own after another: the CUDA
driver calls the array protocols need.

The C API orders its own slots (tf_slot_wait, tf_event_wait), but DLPack's
producer must make a consumer's stream (PyTorch's, CuPy's) wait for the
data, and a __cuda_array_interface__ consumer must make its stream wait
for the producer's: neither stream is a slot.  This module resolves four
entry points of the driver the library already loaded (cuEventCreate,
cuEventRecord, cuStreamWaitEvent, cuEventDestroy, through
cuGetProcAddress, with the same CUDA versions the library asks for) and
runs them inside Runtime.with_context, so the runtime's primary context
is current and the caller's comes back.  The host never waits.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import CFUNCTYPE, POINTER, c_char_p, c_int, c_uint, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

from . import errors

if TYPE_CHECKING:
    from .runtime import Runtime

CU_EVENT_DISABLE_TIMING = 2
CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1

# name -> (CUDA version of the ABI, prototype), as src/driver/driver_entries.inc.
_ENTRIES = {
    "cuGetErrorName": (6000, CFUNCTYPE(c_int, c_int, POINTER(c_char_p))),
    "cuEventCreate": (2000, CFUNCTYPE(c_int, POINTER(c_void_p), c_uint)),
    "cuEventRecord": (2000, CFUNCTYPE(c_int, c_void_p, c_void_p)),
    "cuStreamWaitEvent": (3020, CFUNCTYPE(c_int, c_void_p, c_void_p, c_uint)),
    "cuEventDestroy": (4000, CFUNCTYPE(c_int, c_void_p)),
}

_lock = threading.Lock()
_resolved: Optional[Dict[str, Callable[..., int]]] = None


def _driver_library() -> ctypes.CDLL:
    """The libcuda.so.1 in this process (the library's: the override of
    TENFERRO_GPU_CUDA_DRIVER, else the SONAME), else the one the loader
    finds."""
    names = [os.environ.get("TENFERRO_GPU_CUDA_DRIVER") or "", "libcuda.so.1"]
    for name in filter(None, names):
        try:
            return ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            continue
    return ctypes.CDLL("libcuda.so.1")


def _resolve() -> Dict[str, Callable[..., int]]:
    global _resolved
    with _lock:
        if _resolved is None:
            lib = _driver_library()
            try:
                gpa: Any = lib.cuGetProcAddress_v2
                gpa.argtypes = [c_char_p, POINTER(c_void_p), c_int, c_uint64, c_void_p]
            except AttributeError:
                gpa = lib.cuGetProcAddress
                gpa.argtypes = [c_char_p, POINTER(c_void_p), c_int, c_uint64]
            gpa.restype = c_int
            found: Dict[str, Callable[..., int]] = {}
            for name, (version, prototype) in _ENTRIES.items():
                address = c_void_p()
                extra = [None] if len(gpa.argtypes) == 5 else []
                rc = gpa(name.encode(), ctypes.byref(address), version,
                         CU_GET_PROC_ADDRESS_LEGACY_STREAM, *extra)
                if rc != 0 or not address.value:
                    raise errors.error_class(errors.Status.NOT_SUPPORTED)(
                        errors.Status.NOT_SUPPORTED, "stream ordering", "cuGetProcAddress",
                        rc, errors.CodeDomain.CUDA,
                        f"stream ordering: the CUDA driver has no {name} (CUDA {version})")
                found[name] = prototype(address.value)
            _resolved = found
        return _resolved


def _error(operation: str, call: str, rc: int) -> errors.TenferroError:
    name = c_char_p()
    entries = _resolve()
    text = (name.value or b"").decode() if entries["cuGetErrorName"](rc, ctypes.byref(name)) == 0 \
        else "unknown"
    return errors.CudaError(errors.Status.CUDA, operation, call, rc, errors.CodeDomain.CUDA,
                            f"{operation}: {call} failed: {text} ({rc})")


def stream_wait(runtime: "Runtime", waiter: int, producer: int, operation: str) -> None:
    """Make stream `waiter` wait, on the device, for the work queued on
    stream `producer` so far (both CUstreams of the runtime's device as
    integers; 1 and 2 are the legacy and per-thread default streams).
    Raises CudaError naming `operation` when the driver refuses."""
    if waiter == producer:
        return
    entries = _resolve()

    def inside() -> None:
        event = c_void_p()
        rc = entries["cuEventCreate"](ctypes.byref(event), CU_EVENT_DISABLE_TIMING)
        if rc:
            raise _error(operation, "cuEventCreate", rc)
        try:
            rc = entries["cuEventRecord"](event, c_void_p(producer))
            if rc:
                raise _error(operation, "cuEventRecord", rc)
            rc = entries["cuStreamWaitEvent"](c_void_p(waiter), event, 0)
            if rc:
                raise _error(operation, "cuStreamWaitEvent", rc)
        finally:
            # The driver keeps what the queued wait needs: destroying an
            # event right after the wait is queued is allowed.
            entries["cuEventDestroy"](event)
    runtime.with_context(inside)
