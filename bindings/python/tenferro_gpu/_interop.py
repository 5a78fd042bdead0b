# SPDX-License-Identifier: MIT OR Apache-2.0
"""What other libraries read a DeviceBuffer through: the CUDA Array
Interface (version 3) and DLPack (__dlpack__ / __dlpack_device__).

Both describe the same memory without copying it.  The buffer's "stream"
is the slot stream the runtime's calls use where the protocol is asked
(the current Stream's, else the calling thread's slot): that is where the
binding's own work on the buffer went.

DLPack: the capsule holds a DLManagedTensor (or DLManagedTensorVersioned)
whose shape and strides live in ctypes arrays owned by a registry entry,
together with the DeviceBuffer, which keeps the allocation (and its
runtime) alive.  The deleter (a ctypes callback made once) drops the entry;
the capsule's destructor calls it when no consumer took the capsule.  A
consumer that outlives the interpreter's shutdown cannot call back into
Python: drop its tensors before exiting (as for any ctypes-based producer).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from . import _dlpack, _driver

if TYPE_CHECKING:
    from .buffer import DeviceBuffer

LEGACY_STREAM = 1


def cuda_array_interface(buf: "DeviceBuffer") -> Dict[str, Any]:
    typestr = buf.dtype.typestr
    if typestr is None:
        raise AttributeError(f"__cuda_array_interface__ cannot describe {buf.dtype.name}; "
                             f"use DLPack (torch.from_dlpack) or view() another dtype")
    return {
        "shape": buf.shape,
        "typestr": typestr,
        "descr": [("", typestr)],
        "data": (buf.ptr, False),
        "strides": None if buf.is_contiguous else buf.strides,
        "version": 3,
        "stream": buf.runtime.stream(),
    }


# token -> what one exported tensor keeps alive until its deleter runs.
_exports: Dict[int, Tuple[object, ...]] = {}
_lock = threading.Lock()
_tokens = itertools.count(1)


def _release(token: int) -> None:
    with _lock:
        _exports.pop(token, None)


def _deleter(address: Optional[int]) -> None:
    if address:
        _release(_dlpack.DLManagedTensor.from_address(address).manager_ctx or 0)


def _deleter_versioned(address: Optional[int]) -> None:
    if address:
        _release(_dlpack.DLManagedTensorVersioned.from_address(address).manager_ctx or 0)


_DELETER = _dlpack.DELETER(_deleter)
_DELETER_VERSIONED = _dlpack.DELETER(_deleter_versioned)


def _destructor(capsule: Optional[int]) -> None:
    """A capsule nobody consumed: delete its tensor.  Consumed capsules
    were renamed "used_..." and are left alone."""
    for name, deleter in ((_dlpack.NAME, _deleter), (_dlpack.NAME_VERSIONED,
                                                     _deleter_versioned)):
        if _dlpack.capsule_is_valid_raw(capsule, name):
            deleter(_dlpack.capsule_pointer_raw(capsule, name))
            return


_DESTRUCTOR = _dlpack.DESTRUCTOR(_destructor)


def live_exports() -> int:
    """Number of exported tensors whose deleter has not run yet."""
    with _lock:
        return len(_exports)


def _order(buf: "DeviceBuffer", stream: Optional[int]) -> None:
    """Make the consumer's `stream` wait for the buffer's stream (see
    __dlpack__)."""
    if stream == -1:
        return
    if stream is None:
        stream = LEGACY_STREAM
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"__dlpack__ stream must be an integer or None, not "
                        f"{type(stream).__name__}")
    if stream == 0 or stream < -1:
        raise ValueError(f"__dlpack__ stream {stream} is not allowed (0 is ambiguous; "
                         f"give 1 for the legacy default stream, -1 for no ordering)")
    runtime = buf.runtime
    _driver.stream_wait(runtime, stream, runtime.stream(), "__dlpack__")


def dlpack_capsule(buf: "DeviceBuffer", stream: Optional[int],
                   max_version: Optional[Tuple[int, int]],
                   dl_device: Optional[Tuple[int, int]], copy: Optional[bool]) -> Any:
    device = buf.__dlpack_device__()
    if dl_device is not None and tuple(dl_device) != device:
        raise BufferError(f"__dlpack__: the buffer is on device {device}, not {tuple(dl_device)};"
                          f" copy it with a library that copies between devices")
    flags = 0
    if copy:
        source = buf
        buf = buf.runtime.empty(source.shape, source.dtype)
        buf.runtime.copy(source, buf)
        flags |= _dlpack.FLAG_IS_COPIED
    _order(buf, stream)
    versioned = max_version is not None and int(max_version[0]) >= _dlpack.VERSION[0]
    ndim = buf.ndim
    shape = (ctypes.c_int64 * max(ndim, 1))(*buf.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*(s // buf.itemsize for s in buf.strides))
    token = next(_tokens)
    managed: Any
    if versioned:
        managed = _dlpack.DLManagedTensorVersioned()
        managed.version.major, managed.version.minor = _dlpack.VERSION
        managed.flags = flags
        managed.deleter = _DELETER_VERSIONED
    else:
        managed = _dlpack.DLManagedTensor()
        managed.deleter = _DELETER
    managed.manager_ctx = token
    tensor = managed.dl_tensor
    # DLPack asks for an aligned data pointer and the rest in byte_offset:
    # the allocation's start is 256-byte aligned, as cuMemAlloc's is.
    offset = buf._offset
    tensor.data = (buf.ptr - offset) or None
    tensor.byte_offset = offset
    tensor.device.device_type, tensor.device.device_id = device
    tensor.ndim = ndim
    tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = buf.dtype.dlpack
    tensor.shape = shape
    tensor.strides = strides
    with _lock:
        _exports[token] = (buf, managed, shape, strides)
    try:
        return _dlpack.capsule_new(ctypes.addressof(managed),
                                   _dlpack.NAME_VERSIONED if versioned else _dlpack.NAME,
                                   ctypes.cast(_DESTRUCTOR, ctypes.c_void_p))
    except BaseException:
        _release(token)
        raise
