# SPDX-License-Identifier: MIT OR Apache-2.0
"""Device memory and transfers (include/tenferro_gpu.h, "Device memory and
transfers"; docs/transfers.md).

Device memory is a DeviceBuffer (buffer.py), a plain integer device address
(a CUdeviceptr the caller owns), or any object with __dlpack__ or
__cuda_array_interface__ (a PyTorch tensor, a CuPy array: _foreign.py).
Host memory is any object with the buffer protocol: uploads read any
readable buffer (bytes, bytearray, memoryview, array.array, NumPy arrays,
tensor.numpy()), downloads write any writable one.  Work is queued on the
slot this call uses (the current Stream's, a bound handle's, else the
calling thread's) after what is already queued there (tf_upload,
tf_download, ... say when each returns).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple, Union

from . import _capi, _dtypes, _foreign, _holds, errors
from . import pool as _pool
from ._current import current_streams as _current_streams
from ._buffers import borrow
from .buffer import DeviceBuffer

if TYPE_CHECKING:
    from .runtime import Runtime

Span = Tuple[int, Optional[int], Optional[_foreign.Foreign]]


def _span(runtime: "Runtime", device: Any, name: str, writable: bool) -> Span:
    """(address, bytes there or None when unknown, the Foreign to finish
    after the call or None) of `device`: a DeviceBuffer (contiguous), an
    integer address, or another library's array."""
    if type(device) is int:
        return _capi.uint64(device, name), None, None
    if isinstance(device, DeviceBuffer):
        device._check_contiguous(name)
        return device.ptr, device.nbytes, None
    if _foreign.has_protocol(device):
        foreign = _foreign.borrow(runtime, device, writable)
        return foreign.address, foreign.nbytes, foreign
    return _capi.uint64(device, name), None, None     # an index, else the TypeError


def _at(span: Span, offset: int, nbytes: int, name: str, runtime: "Runtime") -> int:
    """The address `offset` bytes into the span, checking that nbytes fit
    when its size is known (finishing its Foreign, unused, when not)."""
    address, extent, foreign = span
    if offset < 0 or (extent is not None and offset + nbytes > extent):
        if foreign is not None:
            foreign.done(runtime, queued=False)
        what = "DeviceBuffer" if foreign is None else "device array"
        raise ValueError(f"{name}: {nbytes} bytes at offset {offset} do not fit "
                         f"the {extent}-byte {what}")
    return _capi.uint64(address + offset, name)


def _address(runtime: "Runtime", device: Any, offset: int, nbytes: int, name: str,
             writable: bool) -> Tuple[int, Optional[_foreign.Foreign]]:
    """The device address `offset` bytes into `device`, checking the bounds
    of what has a known size; and the Foreign to finish after the call."""
    offset = _capi.size(offset, f"{name} offset")
    span = _span(runtime, device, name, writable)
    return _at(span, offset, nbytes, name, runtime), span[2]


def _finish(runtime: "Runtime", queued: bool, *spans: Optional[Span]) -> None:
    for span in spans:
        if span is not None and span[2] is not None:
            span[2].done(runtime, queued)


def _default_length(span: Span, offset: int, name: str) -> int:
    if span[1] is None:
        raise TypeError(f"{name}: give nbytes when src is an address")
    return span[1] - offset


class _Layout:
    """What download_scalar needs of a struct format, made once per format."""

    __slots__ = ("struct", "unpack", "size", "csize", "single")

    def __init__(self, fmt: str) -> None:
        self.struct = struct.Struct(fmt)
        self.unpack = self.struct.unpack_from
        self.size = self.struct.size
        if self.size > _capi.SCALAR_DOWNLOAD_MAX_BYTES:
            raise ValueError(f"format {fmt!r} is {self.size} bytes; download_scalar reads "
                             f"at most {_capi.SCALAR_DOWNLOAD_MAX_BYTES}")
        self.csize = ctypes.c_size_t(self.size)
        self.single = len(self.struct.unpack(bytes(self.size))) == 1


_layouts: Dict[str, _Layout] = {}
# This thread's 16-byte out-buffer of tf_download_scalar (the GIL is
# released during the call, so threads cannot share one).
_local = threading.local()
_ScalarOut = ctypes.c_char * _capi.SCALAR_DOWNLOAD_MAX_BYTES

# The statuses after which the copy queued nothing and its host memory is
# free again (the @failure of tf_upload and tf_download): the binding then
# keeps nothing.  An upload refused inside a capture is RUNTIME_STATE.
_UPLOAD_QUEUED_NOTHING = (errors.Status.INVALID_ARGUMENT, errors.Status.RUNTIME_STATE)
_DOWNLOAD_QUEUED_NOTHING = (errors.Status.INVALID_ARGUMENT,)


class TransfersMixin:
    """Runtime methods for device memory and transfers."""

    __slots__ = ()

    if TYPE_CHECKING:
        _identity: int
        _bound: bool
        _hc: Any

        def _active(self) -> Any: ...
        def _target(self) -> "Runtime": ...
        def retire(self, release: Any, /, *args: Any) -> None: ...

    def alloc(self, nbytes: int) -> DeviceBuffer:
        """A DeviceBuffer of `nbytes` bytes (tf_alloc; dtype uint8, shape
        (nbytes,)), in order on this call's slot.  Raises OutOfMemoryError
        when device memory is exhausted."""
        return DeviceBuffer(self._self(), nbytes)

    def empty(self, shape: Union[int, Sequence[int]], dtype: object = "float32") -> DeviceBuffer:
        """An uninitialized DeviceBuffer of `shape` elements of `dtype`
        (tenferro_gpu.dtype() lists what it accepts), in C order."""
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        return DeviceBuffer._empty(self._self(), _capi.dims(dims, "shape"),
                                   _dtypes.dtype(dtype))

    def to_device(self, host: Any, dtype: object = None) -> DeviceBuffer:
        """A new DeviceBuffer holding a copy of host array `host` (anything
        with the buffer protocol; its format and shape give the dtype and
        shape unless `dtype` is given, then the shape is 1-D)."""
        view = memoryview(host)
        if dtype is None:
            dt = _dtypes.from_buffer_format(view.format, view.itemsize)
            shape: Tuple[int, ...] = tuple(view.shape or ())
        else:
            dt = _dtypes.dtype(dtype)
            if view.nbytes % dt.itemsize:
                raise ValueError(f"{view.nbytes} bytes are not a whole number of {dt.name}")
            shape = (view.nbytes // dt.itemsize,)
        view.release()
        buf = self.empty(shape, dt)
        try:
            self.upload(host, buf)
        except BaseException:
            buf.free()
            raise
        return buf

    def _self(self) -> "Runtime":
        return self      # type: ignore[return-value]

    def upload(self, src: Any, dst: Any, *, offset: int = 0) -> None:
        """Copy all bytes of host buffer `src` to device memory `dst` (a
        DeviceBuffer, an address, or another library's array) at byte
        `offset` (tf_upload).  `src` may be reused as soon as this returns;
        later work on this slot sees the data."""
        with borrow(src, writable=False) as (host, n):
            address, foreign = _address(self._self(), dst, offset, n, "dst", True)
            st = _capi.api().tf_upload(self._active(), host, address, n)
            self._after_copy(st, src, host, n, foreign, queued=True,
                             queued_nothing=_UPLOAD_QUEUED_NOTHING)
            _pool.record_uses(self._self(), dst)

    def download(self, src: Any, dst: Any, *, offset: int = 0) -> Any:
        """Fill all of writable host buffer `dst` from device memory `src`
        (a DeviceBuffer, an address, or another library's array) at byte
        `offset`, after the work queued on this slot (tf_download).  Returns
        `dst`.  After a failure `dst` may be partly written (see
        tf_download), and until the device has passed the copy the binding
        keeps `dst` (exported; a HostBuffer is not given back to the pool)."""
        with borrow(dst, writable=True) as (host, n):
            address, foreign = _address(self._self(), src, offset, n, "src", False)
            st = _capi.api().tf_download(self._active(), address, host, n)
            self._after_copy(st, dst, host, n, foreign, queued=False,
                             queued_nothing=_DOWNLOAD_QUEUED_NOTHING)
        return dst

    def _after_copy(self, st: int, obj: object, host: int, n: int,
                    foreign: Optional[_foreign.Foreign], queued: bool,
                    queued_nothing: Tuple[int, ...]) -> None:
        """After tf_upload / tf_download: raise its failure (read first:
        what follows may call the library), keeping the host memory while a
        failed copy may still use it (_holds.py), unless the call's status
        is one of `queued_nothing` (the header's @failure: nothing was
        queued, the host memory is free again); finish the other library's
        array."""
        error = _capi.error(st) if st else None
        rt = self._self()
        if error is not None and st in queued_nothing:
            queued = False
        elif error is not None and n:
            _holds.keep_host(rt, host, n, obj)
            queued = True
        if foreign is not None:
            foreign.done(rt, queued=queued)
        if error is not None:
            try:
                raise error
            finally:
                error = None      # no frame -> exception cycle

    def download_scalar(self, src: Any, format: str = "d", *, offset: int = 0) -> Any:
        """Read one small value at `src` + byte `offset` after the work
        queued on this slot (tf_download_scalar): `format` is a struct
        module format of at most 16 bytes ("f", "d", "q", "2f" for a complex
        float).  Returns the value, or a tuple for a format of several
        items.  DeviceBuffer.item() reads with the buffer's own dtype."""
        layout = _layouts.get(format)
        if layout is None:
            layout = _layouts[format] = _Layout(format)
        # The common case first, with nothing to check but what Python
        # knows and the library does not: a live contiguous DeviceBuffer
        # read from its start, within its bounds.
        if (type(src) is DeviceBuffer and offset == 0 and layout.size <= src._head
                and src._alloc.ptr is not None):
            address = src._address
            caddress: Any = src._cptr
            foreign = None
        else:
            address, foreign = _address(self._self(), src, offset, layout.size, "src", False)
            caddress = None
        rt = self               # Runtime._target(), inlined (~80 ns)
        if not self._bound:
            streams = _current_streams.get()
            if streams is not None:
                rt = streams.get(self._identity, self)
        if rt._hc is None:
            if foreign is not None:
                foreign.done(self._self(), queued=False)
            rt._closed_error()      # type: ignore[attr-defined]
        # The Ref goes to the call inline: NOTE calls hold their handle.
        sp = _capi.speedups
        if sp is not None:
            raw = sp.download_scalar(rt._hc, address, layout.size)
            st = raw if type(raw) is int else 0
        else:
            try:
                raw = _local.scalar
            except AttributeError:
                raw = _local.scalar = _ScalarOut()
            if caddress is None:
                caddress = ctypes.c_uint64(address)
            st = _capi.fast.download_scalar(rt._hc, caddress, raw, layout.csize)
        if foreign is not None:
            # The error record first: releasing the other library's tensor
            # may call this library (and replace the thread's record).
            error = _capi.error(st) if st and st != _capi.CLOSED else None
            foreign.done(self._self(), queued=False)
            if st and error is None:
                rt._fail(st)        # type: ignore[attr-defined]
            elif error is not None:
                try:
                    raise error
                finally:
                    error = None    # no frame -> exception cycle
        elif st:
            rt._fail(st)            # type: ignore[attr-defined]
        values = layout.unpack(raw)
        return values[0] if layout.single else values

    def _scalar_bytes(self, address: int, size: int) -> bytes:
        """`size` bytes at device `address` (tf_download_scalar)."""
        out = _ScalarOut()
        _capi.check(_capi.api().tf_download_scalar(self._active(), address, out, size))
        return out.raw[:size]

    def copy(self, src: Any, dst: Any, nbytes: Optional[int] = None, *,
             src_offset: int = 0, dst_offset: int = 0) -> None:
        """Copy `nbytes` (default: all of `src` after src_offset, when src is
        a DeviceBuffer or another library's array) of device memory on the
        runtime's device, queued on this slot (tf_copy).  The ranges must
        not overlap."""
        self._copy(None, src, dst, nbytes, src_offset, dst_offset, "copy")

    def _copy(self, peer: Optional["Runtime"], src: Any, dst: Any, nbytes: Optional[int],
              src_offset: int, dst_offset: int, name: str) -> None:
        """tf_copy, or tf_peer_copy to runtime `peer`."""
        rt = self._self()
        src_offset = _capi.size(src_offset, "src offset")
        dst_offset = _capi.size(dst_offset, "dst offset")
        s_span: Optional[Span] = None
        d_span: Optional[Span] = None
        try:
            s_span = _span(rt, src, "src", False)
            if nbytes is None:
                nbytes = _default_length(s_span, src_offset, name)
            n = _capi.size(nbytes, "nbytes")
            s = _at(s_span, src_offset, n, "src", rt)
            # Another library's dst is ordered on this call's slot, which
            # runs the copy (for a peer copy too).
            d_span = _span(rt, dst, "dst", True)
            d = _at(d_span, dst_offset, n, "dst", rt)
        except BaseException:
            _finish(rt, False, s_span, d_span)
            raise
        try:
            if peer is None:
                _capi.check(_capi.api().tf_copy(self._active(), s, d, n))
                _pool.record_uses(rt, src, dst)
            else:
                _capi.check(_capi.api().tf_peer_copy(self._active(), s, peer._ref(), d, n))
                # dst is another device's unless both runtimes share one
                same_device = peer.ordinal == rt.ordinal
                _pool.record_uses(rt, src, *((dst,) if same_device else ()))
        finally:
            _finish(rt, True, s_span, d_span)

    def peer_copy_available(self, dst_runtime: "Runtime") -> bool:
        """Whether copies from this runtime's device to dst_runtime's run
        directly (NVLink or PCIe peer to peer); always True on one device."""
        out = ctypes.c_int32()
        _capi.check(_capi.api().tf_peer_copy_available(
            self._active(), dst_runtime._ref(), ctypes.byref(out)))
        return bool(out.value)

    def peer_copy(self, src: Any, dst_runtime: "Runtime", dst: Any,
                  nbytes: Optional[int] = None) -> None:
        """Copy `nbytes` (default: all of `src`, when it is a DeviceBuffer or
        another library's array) from this runtime's device to `dst` on
        dst_runtime's device, queued on this call's slot of this runtime
        (tf_peer_copy).  dst_runtime's streams do not wait for it: sync()
        this runtime from this slot first."""
        self._copy(dst_runtime, src, dst, nbytes, 0, 0, "peer_copy")


__all__ = ["DeviceBuffer", "TransfersMixin"]
