# SPDX-License-Identifier: MIT OR Apache-2.0
"""Device memory of other libraries, taken wherever the binding takes a
device address: any object with __dlpack__ (PyTorch, CuPy, JAX, ...) or
__cuda_array_interface__ (CuPy, Numba, PyTorch).

    rt.copy(torch_tensor, buf)            # no data_ptr() needed

DLPack is asked first: its producer makes its data ready on the stream the
runtime's calls use here (the binding passes it as `stream`), without the
host waiting.  For an interface dict, a "stream" entry (version 3) is made
to come first on that stream the same way (an event and
cuStreamWaitEvent).  The memory must be contiguous in C order.

What the binding queues stays ordered on its slot only: work another
library queues later on its own stream and that reads what the binding
wrote must wait for the slot (use the slot's stream in that library:
Stream.torch_stream(), or Runtime.sync()).

The object, or the DLPack tensor the binding took, is kept until the
device has passed the work queued with it (Runtime.retire, one for all the
objects of one call), so a tensor dropped right after the call is not
reused under the queued work.  With the extension a capsule of the common
kind (CUDA memory, float32 or float64, C order) is read in C.
"""

from __future__ import annotations

import ctypes
import functools
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple

from . import _capi, _dlpack, _driver, _dtypes, errors

if TYPE_CHECKING:
    from .runtime import Runtime


class Foreign:
    """Device memory borrowed from another library's object for one call."""

    __slots__ = ("address", "nbytes", "_keep", "_release")

    address: int
    nbytes: int
    _keep: object
    _release: Optional[Callable[[], None]]

    def __init__(self, address: int, nbytes: int, keep: object,
                 release: Optional[Callable[[], None]]) -> None:
        self.address, self.nbytes, self._keep, self._release = address, nbytes, keep, release

    def done(self, runtime: "Runtime", queued: bool) -> None:
        """After the C call: keep the memory (and drop the DLPack tensor)
        until the device has passed the work, or at once when the call
        waited for it (queued=False).  If the library cannot retire
        (a faulted device), both are kept for the process's life rather
        than released under work that may still run; the call's own
        error, if any, is what the caller sees."""
        keep, release = self._keep, self._release
        self._keep = self._release = None
        if not queued:
            if release is not None:
                release()
            return
        try:
            runtime.retire(_finish, keep, release)
        except errors.TenferroError:
            _leaked.append((keep, release))


def finish(runtime: "Runtime", borrowed: List[Foreign], queued: bool) -> None:
    """Foreign.done for what one call borrowed, with one retirement."""
    if len(borrowed) < 2:
        for foreign in borrowed:
            foreign.done(runtime, queued)
        return
    held = []
    for foreign in borrowed:
        held.append((foreign._keep, foreign._release))
        foreign._keep = foreign._release = None
    if not queued:
        _finish_all(held)
        return
    try:
        runtime.retire(_finish_all, held)
    except errors.TenferroError:
        _leaked.extend(held)


def _finish_all(held: List[Tuple[object, Optional[Callable[[], None]]]]) -> None:
    for keep, release in held:
        _finish(keep, release)


# What could not be retired (see Foreign.done): never released.
_leaked: List[Tuple[object, Optional[Callable[[], None]]]] = []


def _finish(keep: object, release: Optional[Callable[[], None]]) -> None:
    if release is not None:
        release()


def has_protocol(obj: object) -> bool:
    return hasattr(obj, "__dlpack__") or hasattr(obj, "__cuda_array_interface__")


def _check_c_order(shape: Sequence[int], strides: Optional[Sequence[int]], itemsize: int,
                   what: str) -> None:
    """Raise BufferError unless `strides` (bytes; None: C order) are C order."""
    if strides is None:
        return
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 0:
            return
        if n != 1 and s != expected:
            raise BufferError(f"{what} is not contiguous (shape {tuple(shape)}, strides "
                              f"{tuple(strides)} bytes); the binding's calls need C order")
        expected *= n


def _describe(obj: object) -> str:
    return type(obj).__module__ + "." + type(obj).__qualname__


def borrow(runtime: "Runtime", obj: Any, writable: bool) -> Foreign:
    """The device memory of `obj` for a call on `runtime` (see the module
    description).  TypeError for host memory or an object without either
    protocol, BufferError for non-contiguous memory."""
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(runtime, obj, writable)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_interface(runtime, obj, writable)
    raise TypeError(f"expected device memory: a DeviceBuffer, an integer address, or "
                    f"an object with __dlpack__ or __cuda_array_interface__; got "
                    f"{_describe(obj)}")


def _from_interface(runtime: "Runtime", obj: Any, writable: bool) -> Foreign:
    cai = obj.__cuda_array_interface__
    address, readonly = cai["data"]
    if writable and readonly:
        raise TypeError(f"{_describe(obj)} is read-only device memory")
    if cai.get("mask") is not None:
        raise BufferError(f"{_describe(obj)} has a mask, which the binding cannot honour")
    shape = tuple(int(n) for n in cai["shape"])
    itemsize = _dtypes.from_typestr(cai["typestr"]).itemsize
    strides = cai.get("strides")
    _check_c_order(shape, strides, itemsize, _describe(obj))
    nbytes = itemsize
    for n in shape:
        nbytes *= n
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    if stream is not None:
        if stream == 0:
            raise ValueError(f"{_describe(obj)}: __cuda_array_interface__ stream 0 is "
                             f"not allowed (ambiguous)")
        _driver.stream_wait(runtime, runtime.stream(), int(stream), "__cuda_array_interface__")
    return Foreign(int(address or 0), nbytes, obj, None)


def _from_dlpack(runtime: "Runtime", obj: Any, writable: bool) -> Foreign:
    device = getattr(obj, "__dlpack_device__", None)
    if device is not None:
        kind = int(device()[0])
        if kind not in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
            raise TypeError(f"{_describe(obj)} is not CUDA device memory (DLPack device "
                            f"type {kind}); give device memory")
    ours = runtime.stream()
    try:
        capsule = obj.__dlpack__(stream=ours, max_version=_dlpack.VERSION)
    except TypeError:           # a producer older than max_version
        capsule = obj.__dlpack__(stream=ours)
    sp = _capi.speedups
    if sp is not None:      # the common kind (a torch.Tensor's), read in C
        taken = sp.take_dlpack(capsule, writable)
        if taken is not None:
            start, nbytes, managed, versioned = taken
            return Foreign(start, nbytes, None,
                           functools.partial(sp.dlpack_delete, managed, versioned))
    return take_capsule(capsule, writable, _describe(obj))


def take_capsule(capsule: Any, writable: bool, what: str) -> Foreign:
    """Consume a DLPack capsule: check what it describes, rename it "used_"
    and return the memory with a release that calls its deleter."""
    name = _dlpack.capsule_name(capsule)
    versioned = name == _dlpack.NAME_VERSIONED
    if not versioned and name != _dlpack.NAME:
        raise TypeError(f"{what}.__dlpack__ returned a capsule named {name!r}, not an "
                        f"unused DLPack tensor")
    address = int(_dlpack.capsule_pointer(capsule, name))
    tensor: Any
    if versioned:
        managed: Any = _dlpack.DLManagedTensorVersioned.from_address(address)
        if managed.version.major != _dlpack.VERSION[0]:
            raise BufferError(f"{what}: DLPack version {managed.version.major}."
                              f"{managed.version.minor} is not supported")
        if writable and managed.flags & _dlpack.FLAG_READ_ONLY:
            raise TypeError(f"{what} is read-only device memory")
        tensor = managed.dl_tensor
    else:
        tensor = _dlpack.DLManagedTensor.from_address(address).dl_tensor
    kind = int(tensor.device.device_type)
    if kind not in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
        raise TypeError(f"{what} is not CUDA device memory (DLPack device type {kind})")
    dt = _dtypes.from_dlpack(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
    shape = [int(tensor.shape[i]) for i in range(tensor.ndim)]
    strides = ([int(tensor.strides[i]) * dt.itemsize for i in range(tensor.ndim)]
               if tensor.strides else None)
    _check_c_order(shape, strides, dt.itemsize, what)
    nbytes = dt.itemsize
    for n in shape:
        nbytes *= n
    start = int(tensor.data or 0) + int(tensor.byte_offset)
    # From here the binding owns the tensor: the capsule no longer deletes it.
    _dlpack.capsule_set_name(capsule, _dlpack.USED_VERSIONED if versioned else _dlpack.USED)
    return Foreign(start, nbytes, None, lambda: _dlpack.call_deleter(address, versioned))


def address_of(runtime: "Runtime", obj: Any, writable: bool) -> Tuple[int, Foreign]:
    """(address, the Foreign to finish) of another library's object."""
    foreign = borrow(runtime, obj, writable)
    return foreign.address, foreign


def pointer_argument(runtime: "Runtime", obj: Any) -> Tuple[ctypes.c_uint64, Foreign]:
    """A kernel's pointer parameter from another library's object."""
    foreign = borrow(runtime, obj, writable=True)
    return ctypes.c_uint64(foreign.address), foreign
