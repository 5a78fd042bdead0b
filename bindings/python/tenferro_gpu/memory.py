"""Device memory and transfers (include/tenferro_gpu.h, "Device memory and
transfers"; docs/transfers.md).

Device memory is a DeviceBuffer that owns its allocation, or a plain
integer device address (a CUdeviceptr: torch.Tensor.data_ptr(),
cupy.ndarray.data.ptr) that the caller owns.  Host memory is any object with
the buffer protocol: uploads read any readable buffer (bytes, bytearray,
memoryview, array.array, NumPy arrays, tensor.numpy()), downloads write any
writable one.  Work is queued on the calling thread's stream slot after what
is already queued there (tf_upload, tf_download, ... say when each returns).
"""

import ctypes
import struct
import weakref

from . import _callbacks, _capi
from ._buffers import borrow
from ._owned import Owned


def _freed_by(ptr, owner, slot):
    """Free `ptr` in order on stream slot `slot` of `owner` (a Runtime the
    buffer holds), whichever thread runs this, then drop `owner`.  Returns
    the tf_free status.

    Only a retired buffer's release can find `owner` closed: at interpreter
    exit, when the owner's own finalizer released the runtime's last
    reference and its teardown runs the pending releases.  The memory then
    goes with the primary context, and nothing is called."""
    if owner.closed:
        return 0
    api = _capi.api()
    handle = owner.handle
    current = ctypes.c_int32(-1)
    api.tf_runtime_current_slot(handle, ctypes.byref(current))
    try:
        if current.value == slot:
            return api.tf_free(handle, ptr)
        bound = ctypes.c_void_p()
        st = api.tf_runtime_bind_slot(handle, slot, ctypes.byref(bound))
        if st != 0:
            return st
        try:
            return api.tf_free(bound.value, ptr)
        finally:
            api.tf_runtime_release(bound.value)
    finally:
        owner.close()


class DeviceBuffer(Owned):
    """`nbytes` of device memory from tf_alloc, owned by this object.

    free() (or leaving a `with` block, or garbage collection) releases it
    with tf_free, in order on the stream slot it was allocated from, so work
    queued there before still sees it; work on other slots that uses it must
    be finished first (Runtime.slot_wait, an Event, or Runtime.sync on that
    slot).  retire() instead frees it once the device has passed the work
    queued so far on the calling thread's slot, without waiting.

    The buffer holds a reference to its runtime, which stays alive until the
    buffer is freed.  With memory pools (Capability.STREAM_ORDERED_ALLOC)
    the memory is usable at once by later work on the allocating slot, by
    other slots and the host after a sync of that slot; the contents start
    uninitialized.
    """

    __slots__ = ("_runtime", "_nbytes", "_slot")
    _kind, _closed_word = "DeviceBuffer", "freed"

    def __init__(self, runtime, nbytes):
        api = _capi.api()
        nbytes = _capi.size(nbytes, "nbytes")
        owner = runtime.clone()
        try:
            slot = owner.current_slot
            out = ctypes.c_uint64()
            _capi.check(api.tf_alloc(owner.handle, nbytes, ctypes.byref(out)))
        except BaseException:
            owner.close()
            raise
        self._runtime, self._nbytes, self._slot = owner, nbytes, slot
        self._own(out.value, _freed_by, owner, slot)

    @property
    def ptr(self):
        """The device address (a CUdeviceptr) as an integer; 0 for an empty
        buffer.  Raises ValueError once freed."""
        return self.handle

    @property
    def nbytes(self):
        """Size in bytes."""
        return self._nbytes

    def __len__(self):
        return self._nbytes

    @property
    def runtime(self):
        """The runtime the buffer was allocated through (borrowed: do not
        close it)."""
        return self._runtime

    @property
    def slot(self):
        """The stream slot the buffer was allocated (and is freed) on."""
        return self._slot

    @property
    def freed(self):
        return self.closed

    def free(self):
        """Release the memory (tf_free) in order on the allocating slot.
        Idempotent.  Raises the library's error if tf_free failed (the
        memory is then leaked, never freed twice)."""
        self.close()

    def retire(self):
        """Free the memory once the device has finished the work queued so
        far on the calling thread's slot (tf_workspace_retire), without
        making the host wait; the free itself happens during a later
        retire, Runtime.poll_retirements() or Runtime.sync() on any slot,
        or at the runtime's teardown.  The buffer is unusable afterwards.
        If the library cannot retire it (an error other than
        InvalidArgumentError), the memory is leaked, as the device may
        still use it, and the error raised."""
        self.handle
        free = self._finalizer.detach()[2]
        st = _retire_free(self._runtime, free)
        if st in (1, 2):  # INVALID_ARGUMENT / INVALID_HANDLE: still ours
            self._finalizer = weakref.finalize(self, _freed_by, *free)
        _capi.check(st)

    def upload(self, src, offset=0):
        """Copy all of host buffer `src` into this buffer at `offset`."""
        self._runtime.upload(src, self, offset=offset)

    def download(self, dst=None, offset=0):
        """Copy into host buffer `dst` (all of it) from `offset`; with no
        `dst`, a new bytearray of the rest of the buffer.  Returns dst."""
        if dst is None:
            dst = bytearray(self._nbytes - min(offset, self._nbytes))
        return self._runtime.download(self, dst, offset=offset)

    def __repr__(self):
        if self.freed:
            return f"<tenferro_gpu.DeviceBuffer {self._nbytes} bytes (freed)>"
        return (f"<tenferro_gpu.DeviceBuffer {self._nbytes} bytes at "
                f"0x{self._handle:x} slot={self._slot}>")


def _retire_free(owner, free_args):
    """Hand _freed_by(*free_args) to owner's retirement queue."""
    api = _capi.api()
    return _callbacks.retirement(api.tf_workspace_retire, (owner.handle,),
                                 _capi.RELEASE_FN, _freed_by, free_args)


def _address(device, offset, nbytes, name):
    """The device address `offset` bytes into `device` (a DeviceBuffer or an
    integer address), checking a DeviceBuffer's bounds for nbytes."""
    offset = _capi.size(offset, f"{name} offset")
    if isinstance(device, DeviceBuffer):
        if offset + nbytes > device.nbytes:
            raise ValueError(f"{name}: {nbytes} bytes at offset {offset} do not fit "
                             f"the {device.nbytes}-byte DeviceBuffer")
        return device.ptr + offset
    return _capi.uint64(_capi.uint64(device, name) + offset, name)


class TransfersMixin:
    """Runtime methods for device memory and transfers."""

    __slots__ = ()

    def alloc(self, nbytes):
        """A DeviceBuffer of `nbytes` (tf_alloc), in order on the calling
        thread's slot.  Raises OutOfMemoryError when device memory is
        exhausted."""
        return DeviceBuffer(self, nbytes)

    def upload(self, src, dst, *, offset=0):
        """Copy all bytes of host buffer `src` to device memory `dst`
        (a DeviceBuffer or an address) at `offset` (tf_upload).  `src` may
        be reused as soon as this returns; later work on this slot sees the
        data."""
        with borrow(src, writable=False) as (host, n):
            address = _address(dst, offset, n, "dst")
            _capi.check(_capi.api().tf_upload(self.handle, host, address, n))

    def download(self, src, dst, *, offset=0):
        """Fill all of writable host buffer `dst` from device memory `src`
        (a DeviceBuffer or an address) at `offset`, after the work queued on
        this slot (tf_download).  Returns `dst`.  After a failure `dst` may
        be partly written (see tf_download)."""
        with borrow(dst, writable=True) as (host, n):
            address = _address(src, offset, n, "src")
            _capi.check(_capi.api().tf_download(self.handle, address, host, n))
        return dst

    def download_scalar(self, src, format="d", *, offset=0):
        """Read one small value at `src` + `offset` after the work queued on
        this slot (tf_download_scalar): `format` is a struct module format
        of at most 16 bytes ("f", "d", "q", "2f" for a complex float).
        Returns the value, or a tuple for a format of several items."""
        layout = struct.Struct(format)
        if layout.size > _capi.SCALAR_DOWNLOAD_MAX_BYTES:
            raise ValueError(f"format {format!r} is {layout.size} bytes; "
                             f"download_scalar reads at most "
                             f"{_capi.SCALAR_DOWNLOAD_MAX_BYTES}")
        out = ctypes.create_string_buffer(max(layout.size, 1))
        address = _address(src, offset, layout.size, "src")
        _capi.check(_capi.api().tf_download_scalar(self.handle, address, out,
                                                   layout.size))
        values = layout.unpack(out.raw[:layout.size])
        return values[0] if len(values) == 1 else values

    def copy(self, src, dst, nbytes=None, *, src_offset=0, dst_offset=0):
        """Copy `nbytes` (default: all of a DeviceBuffer `src` after
        src_offset) of device memory on the runtime's device, queued on this
        slot (tf_copy).  The ranges must not overlap."""
        if nbytes is None:
            if not isinstance(src, DeviceBuffer):
                raise TypeError("copy: give nbytes when src is an address")
            nbytes = src.nbytes - src_offset
        nbytes = _capi.size(nbytes, "nbytes")
        s = _address(src, src_offset, nbytes, "src")
        d = _address(dst, dst_offset, nbytes, "dst")
        _capi.check(_capi.api().tf_copy(self.handle, s, d, nbytes))

    def peer_copy_available(self, dst_runtime):
        """Whether copies from this runtime's device to dst_runtime's run
        directly (NVLink or PCIe peer to peer); always True on one device."""
        out = ctypes.c_int32()
        _capi.check(_capi.api().tf_peer_copy_available(
            self.handle, dst_runtime.handle, ctypes.byref(out)))
        return bool(out.value)

    def peer_copy(self, src, dst_runtime, dst, nbytes=None):
        """Copy `nbytes` (default: all of a DeviceBuffer `src`) from this
        runtime's device to `dst` on dst_runtime's device, queued on this
        thread's slot of this runtime (tf_peer_copy).  dst_runtime's streams
        do not wait for it: sync() this runtime from this slot first."""
        if nbytes is None:
            if not isinstance(src, DeviceBuffer):
                raise TypeError("peer_copy: give nbytes when src is an address")
            nbytes = src.nbytes
        nbytes = _capi.size(nbytes, "nbytes")
        s = _address(src, 0, nbytes, "src")
        d = _address(dst, 0, nbytes, "dst")
        _capi.check(_capi.api().tf_peer_copy(self.handle, s, dst_runtime.handle, d, nbytes))
