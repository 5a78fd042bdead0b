# SPDX-License-Identifier: MIT OR Apache-2.0
"""What other libraries read a DeviceBuffer through: the CUDA Array
Interface (version 3) and DLPack (__dlpack__ / __dlpack_device__).

Both describe the same memory without copying it.  The buffer's "stream"
is the slot stream the runtime's calls use where the protocol is asked
(the current Stream's, else the calling thread's slot): that is where the
binding's own work on the buffer went.

DLPack: the capsule holds a DLManagedTensor (or DLManagedTensorVersioned)
whose shape and strides live in ctypes arrays owned by an _Export, together
with the DeviceBuffer, which keeps the allocation (and its runtime) alive;
the _Export pins the memory (NOTE memory is freed once) until it goes.
With the C extension the tensor owns a reference to its _Export (its
manager_ctx) and the deleter drops it; the capsule's destructor calls the
deleter when no consumer took the capsule.  Both are C (dlpack_release.c)
and keep an exception the consumer has pending.  Without the extension no
callback can keep one (ctypes clears it): the capsule then has no
destructor, the registry below holds it, and poll_unconsumed() deletes the
tensor of one that nobody holds any more unconsumed (at the next export,
free() or garbage collection); the deleter is a ctypes callback.  A
consumer that outlives the interpreter's shutdown cannot call back into
Python: drop its tensors before exiting.

__cuda_array_interface__ has no release: the object read through it keeps
the memory until it is garbage (a consumer holds it while it uses the
memory).
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from . import _capi, _claims, _dlpack, _driver

if TYPE_CHECKING:
    from .buffer import DeviceBuffer

LEGACY_STREAM = 1


def cuda_array_interface(buf: "DeviceBuffer") -> Dict[str, Any]:
    typestr = buf.dtype.typestr
    if typestr is None:
        raise AttributeError(f"__cuda_array_interface__ cannot describe {buf.dtype.name}; "
                             f"use DLPack (torch.from_dlpack) or view() another dtype")
    buf._pin()
    return {
        "shape": buf.shape,
        "typestr": typestr,
        "descr": [("", typestr)],
        "data": (buf.ptr, False),
        "strides": None if buf.is_contiguous else buf.strides,
        "version": 3,
        "stream": buf.runtime.stream(),
    }


class _Export:
    """One exported tensor: what its deleter lets go of."""

    __slots__ = ("buf", "managed", "shape", "strides", "__weakref__")

    def __init__(self, buf: "DeviceBuffer", managed: Any, shape: Any, strides: Any) -> None:
        self.buf, self.managed, self.shape, self.strides = buf, managed, shape, strides


# Re-entrant: a garbage collection may run a release while it is held.
_lock = threading.RLock()
_live = [0]     # exports whose deleter has not run


def _export_gone(claims: _claims.Claims) -> None:
    with _lock:
        _live[0] -= 1
    claims.release_quietly()


def live_exports() -> int:
    """Number of exported tensors whose deleter has not run yet."""
    poll_unconsumed()
    with _lock:
        return _live[0]


# ---- without the extension: the registry and its poll -----------------------

# token -> [the _Export, its capsule (None once consumed)]
_fallback: Dict[int, List[Any]] = {}
_tokens = itertools.count(1)


def _fallback_delete(token: int) -> None:
    with _lock:
        entry = _fallback.pop(token, None)
    del entry           # the _Export's release runs here, outside the lock


def _deleter(address: Optional[int]) -> None:
    if address:
        _fallback_delete(_dlpack.DLManagedTensor.from_address(address).manager_ctx or 0)


def _deleter_versioned(address: Optional[int]) -> None:
    if address:
        _fallback_delete(_dlpack.DLManagedTensorVersioned.from_address(address).manager_ctx or 0)


_DELETER = _dlpack.DELETER(_deleter)
_DELETER_VERSIONED = _dlpack.DELETER(_deleter_versioned)


def _holders(entry: List[Any]) -> int:
    return sys.getrefcount(entry[1])


# The count _holders() sees for a capsule only the registry holds.
_ALONE = _holders([None, object()])


def poll_unconsumed() -> None:
    """Without the extension: delete the tensor of each capsule nobody but
    the registry holds, unconsumed; forget the capsules consumed."""
    if not _fallback:
        return
    with _lock:
        entries = list(_fallback.items())
    gone = []
    for token, entry in entries:
        if entry[1] is None:
            continue
        if _dlpack.capsule_name(entry[1]) in (_dlpack.USED, _dlpack.USED_VERSIONED):
            entry[1] = None          # the consumer owns it now
        elif _holders(entry) <= _ALONE:
            gone.append(token)
    del entries
    for token in gone:
        _fallback_delete(token)


def _on_gc(phase: str, info: Dict[str, int]) -> None:
    if phase == "stop" and _fallback:
        _capi.quietly(poll_unconsumed)


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
    managed: Any
    if versioned:
        managed = _dlpack.DLManagedTensorVersioned()
        managed.version.major, managed.version.minor = _dlpack.VERSION
        managed.flags = flags
    else:
        managed = _dlpack.DLManagedTensor()
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
    return _capsule(_Export(buf, managed, shape, strides), versioned)


def _capsule(export: _Export, versioned: bool) -> Any:
    """The capsule of `export`'s tensor, which from now on pins the
    buffer's memory until its deleter runs."""
    claims = export.buf._alloc.claims
    claims.acquire()
    with _lock:
        _live[0] += 1
    weakref.finalize(export, _export_gone, claims)
    managed = export.managed
    name = _dlpack.NAME_VERSIONED if versioned else _dlpack.NAME
    sp = _capi.speedups
    if sp is not None:
        managed.deleter = _dlpack.DELETER(sp.DELETER_VERSIONED if versioned else sp.DELETER)
        managed.manager_ctx = id(export)
        _dlpack.incref(export)               # the tensor's reference: the deleter's
        try:
            return _dlpack.capsule_new(ctypes.addressof(managed), name, sp.CAPSULE_DESTRUCTOR)
        except BaseException:
            _dlpack.decref(export)
            raise
    token = next(_tokens)
    managed.deleter = _DELETER_VERSIONED if versioned else _DELETER
    managed.manager_ctx = token
    if not _fallback and _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)
    poll_unconsumed()
    capsule = _dlpack.capsule_new(ctypes.addressof(managed), name, None)
    with _lock:
        _fallback[token] = [export, capsule]
    return capsule
