# SPDX-License-Identifier: MIT OR Apache-2.0
"""Page-locked host memory and asynchronous copies (include/tenferro_gpu.h,
tf_host_alloc .. tf_upload_async; docs/transfers.md, "Page-locked host
memory" and "Asynchronous copies").

    with rt.host_alloc(1 << 20) as host:          # a HostBuffer: page-locked
        done = rt.download_async(buf, host)       # queued; returns at once
        ...                                       # other work meanwhile
        done.wait()                               # or: await done
        values = np.frombuffer(host, np.float32)  # no copy

An asynchronous copy takes host memory the runtime tracks: a HostBuffer, a
buffer registered with host_register(), or any buffer-protocol view inside
one of those (a NumPy slice of a HostBuffer).  Anything else raises
InvalidArgumentError: there is no silent synchronous fall-back.
"""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import functools
import sys
import weakref
from typing import TYPE_CHECKING, Any, Dict, Generator, List, NoReturn, Optional, Tuple, Type

from . import _capi, _claims, _handles, _holds, _runtimes, errors
from . import pool as _pool
from ._buffers import Export
from .memory import _address
from .stream_work import Event

if TYPE_CHECKING:
    from .runtime import Runtime
    _Base = ctypes.Array[ctypes.c_uint8]
else:
    _Base = object


@dataclasses.dataclass(frozen=True)
class HostPoolStats:
    """A consistent snapshot of a runtime's page-locked memory counters
    (tf_host_pool_stats).  Bytes are size classes, what the driver holds:
    bytes_in_use + bytes_cached is what the pool holds from the driver;
    pending_frees <= blocks_cached."""
    bytes_in_use: int
    bytes_cached: int
    bytes_registered: int
    blocks_in_use: int
    blocks_cached: int
    driver_allocations: int
    pending_frees: int


def _free_block(ptr: int, identity: int, owner: "weakref.ref[Runtime]") -> int:
    """tf_host_free of block `ptr` (its Claims' free)."""
    return _runtimes.free_through(identity, owner,
                                  lambda handle: int(_capi.api().tf_host_free(handle, ptr)))


def _views_gone(claims: _claims.Claims, owner: "Runtime") -> None:
    """The exporter's on_idle: the last view of a closed HostBuffer went
    (`owner`, held by the views until then, kept the runtime alive)."""
    claims.release_quietly()


def _host_gone(exporter: Any, claims: _claims.Claims, owner: "Runtime") -> None:
    """A HostBuffer is garbage: its claim ends, or with its last view."""
    if exporter is None or exporter.close():
        claims.release_quietly()


class _PyExporter:
    """What the extension's Exporter does, in Python, for CPython 3.12 and
    later without the extension (HostBuffer.__buffer__, PEP 688).  Until
    its count ends, _PY_EXPORTERS holds it: a garbage collection that
    clears a HostBuffer together with a view must not lose the count."""

    __slots__ = ("raw", "exports", "closed", "on_idle")

    def __init__(self, address: int, nbytes: int, on_idle: Any) -> None:
        self.raw = (ctypes.c_uint8 * nbytes).from_address(address)
        self.exports, self.closed, self.on_idle = 0, False, on_idle
        _PY_EXPORTERS[id(self.raw)] = self

    def export(self) -> memoryview:
        if self.closed:
            raise BufferError("the tenferro_gpu.HostBuffer is closed")
        self.exports += 1
        return memoryview(self.raw)

    def release(self) -> None:
        self.exports -= 1
        if self.exports == 0 and self.closed:
            _PY_EXPORTERS.pop(id(self.raw), None)
            self.on_idle()

    def close(self) -> bool:
        self.closed = True
        if self.exports:
            return False
        _PY_EXPORTERS.pop(id(self.raw), None)
        return True


# id of an exporter's memory -> the exporter (see _PyExporter).
_PY_EXPORTERS: Dict[int, _PyExporter] = {}


def _exporter(address: int, nbytes: int, on_idle: Any) -> Any:
    """A counting exporter of the block, or None where exports cannot be
    counted (no extension, CPython before 3.12)."""
    sp = _capi.speedups
    if sp is not None:
        return sp.Exporter(address, nbytes, on_idle)
    if sys.version_info >= (3, 12):
        return _PyExporter(address, nbytes, on_idle)
    return None


class HostBuffer(_Base):
    """A block of page-locked host memory from the runtime's caching pool
    (tf_host_alloc): a ctypes array of `nbytes` uint8, so it has the buffer
    protocol (memoryview(host), numpy.frombuffer(host), bytes(host), all
    without a copy but bytes), indexing and ctypes.addressof.  Not zeroed.

    close() (or leaving the `with` block) ends its use: ptr, indexing, new
    views and the binding's calls refuse it.  The block goes back to the
    pool (tf_host_free) once no view of it is left, and no failed copy may
    still write it (NOTE memory is freed once): at once when there is none,
    else when the last view is released.  Views stay valid until then; a
    block is never handed out again under one.  Without the C extension on
    CPython before 3.12 views cannot be counted: the block then goes back
    when the HostBuffer object and every view (each holds it) are gone.
    Garbage collection of the HostBuffer ends its use the same way.  The
    block keeps its runtime alive, and so does each view.
    """

    # Instances are made by Runtime.host_alloc (one ctypes type per size);
    # these are set on each one.
    _owner: "Runtime"
    _ptr: int
    _claims: _claims.Claims
    _exporter: Any
    _closed: bool
    _finalizer: weakref.finalize

    @property
    def ptr(self) -> int:
        """The block's address.  ValueError once closed."""
        if self._closed:
            _closed()
        return self._ptr

    @property
    def nbytes(self) -> int:
        """The bytes asked for (the copies' bound; the pool holds its size
        class)."""
        return len(self)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def runtime(self) -> "Runtime":
        """The runtime reference the block holds."""
        return self._owner

    def record_use(self, runtime: Optional["Runtime"] = None) -> None:
        """Note that work you queued yourself on the slot calls on `runtime`
        (default: the block's runtime) use here reads or writes this block
        (tf_host_record_use), so that close() waits for it.  The binding's
        own copies record their uses."""
        rt = runtime if runtime is not None else self._owner
        _capi.check(_capi.api().tf_host_record_use(rt._active(), self.ptr))

    def close(self) -> None:
        """End the use of the block (see the class): give it back at once
        when no view is left (tf_host_free), else when the last one goes.
        Idempotent.  A failure of tf_host_free is raised (the block is then
        leaked, never reused)."""
        if self._closed:
            return
        self._closed = True
        exporter = self._exporter
        if exporter is None:
            return                     # views uncounted: it ends with the object
        self._finalizer.detach()
        if exporter.close():
            _capi.check(self._claims.release())

    def __getitem__(self, key: Any) -> Any:
        if self._closed:
            _closed()
        return super().__getitem__(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        if self._closed:
            _closed()
        super().__setitem__(key, value)

    def __buffer__(self, flags: int) -> memoryview:
        """PEP 688 (CPython 3.12 and later, without the extension): a
        counted export."""
        exporter = self._exporter
        if self._closed or exporter is None:
            raise BufferError("the tenferro_gpu.HostBuffer is closed")
        return exporter.export()        # type: ignore[no-any-return]

    def __release_buffer__(self, view: memoryview) -> None:
        exporter = _PY_EXPORTERS.get(id(view.obj))
        if exporter is not None:
            exporter.release()

    def _exit(self) -> None:
        self._finalizer()

    def __enter__(self) -> "HostBuffer":
        self.ptr
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"0x{self._ptr:x}"
        return f"<tenferro_gpu.HostBuffer {len(self)} bytes {state}>"


def _closed() -> NoReturn:
    raise ValueError("the tenferro_gpu.HostBuffer is closed")


@functools.lru_cache(maxsize=64)
def _host_type(nbytes: int) -> Type[HostBuffer]:
    """The HostBuffer subclass of `nbytes` bytes (ctypes fixes an array's
    length per type), exporting through the extension's counting exporter
    when there is one."""
    base: Any = ctypes.c_uint8 * nbytes
    made: Type[HostBuffer] = type("HostBuffer", (HostBuffer, base), {"__module__": __name__})
    if _capi.speedups is not None:
        _capi.speedups.export_through(made)
    return made


def _unregister(export: Export, identity: int, owner: "weakref.ref[Runtime]") -> int:
    """tf_host_unregister, then the buffer goes back to its owner (the
    registration's Claims' free).  A refused unregister (or none: the
    runtime is gone) keeps the buffer exported for the process's life (the
    device may still use it)."""
    def unregister(handle: Any) -> int:
        st = int(_capi.api().tf_host_unregister(handle, export.address))
        if st == 0:
            export.release()
        return st
    st = _runtimes.free_through(identity, owner, unregister)
    if not export.released:
        _kept.append(export)
    return st


def _registration_gone(claims: _claims.Claims, owner: "Runtime") -> None:
    claims.release_quietly()


class HostRegistration:
    """A caller's buffer page-locked for a runtime (tf_host_register): the
    asynchronous copies accept its memory.  It holds the buffer (exported,
    so a bytearray cannot be resized) until close() or leaving the `with`
    block unregisters it (tf_host_unregister, which waits for the streams
    that used it; after a failed copy into it, also for the device to pass
    that copy); garbage collection does the same.  The runtime's last
    release unregisters whatever is still registered."""

    __slots__ = ("_owner", "_export", "_claims", "_finalizer", "__weakref__")

    _owner: "Runtime"
    _export: Export
    _claims: _claims.Claims
    _finalizer: weakref.finalize

    def __init__(self, runtime: "Runtime", obj: object) -> None:
        export = Export(obj, writable=True)
        owner = runtime._owner_clone()
        try:
            _capi.check(_capi.api().tf_host_register(runtime._active(), export.address,
                                                     export.nbytes))
        except BaseException:
            export.release()
            owner.close()
            raise
        self._owner, self._export = owner, export
        self._claims = _claims.Claims(
            functools.partial(_unregister, export, owner._identity, weakref.ref(owner)),
            export.address, export.nbytes)
        _claims.track_host(self._claims)
        self._finalizer = weakref.finalize(self, _registration_gone, self._claims, owner)
        _handles.free_at_exit(self)

    def _exit(self) -> None:
        self._finalizer()

    @property
    def obj(self) -> object:
        """The registered object."""
        return self._export.obj

    @property
    def ptr(self) -> int:
        if not self._finalizer.alive:
            raise ValueError("the tenferro_gpu.HostRegistration is closed")
        return self._export.address

    @property
    def nbytes(self) -> int:
        return self._export.nbytes

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def record_use(self, runtime: Optional["Runtime"] = None) -> None:
        """As HostBuffer.record_use, for the registered range."""
        rt = runtime if runtime is not None else self._owner
        _capi.check(_capi.api().tf_host_record_use(rt._active(), self.ptr))

    def close(self) -> None:
        """Unregister (tf_host_unregister) and release the buffer, at once
        unless a failed copy may still use it (then once the device has
        passed it).  Idempotent.  On a failure the range stays registered
        (the runtime's release unregisters it) and the buffer stays held."""
        if self._finalizer.detach() is not None:
            _capi.check(self._claims.release())

    unregister = close

    def __enter__(self) -> "HostRegistration":
        self.ptr
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"0x{self._export.address:x}"
        return f"<tenferro_gpu.HostRegistration {self.nbytes} bytes {state}>"


# Registrations whose unregister failed: their buffers stay exported for
# the process's life (the device may still use them).
_kept: List[object] = []


def _release_all(keep: Tuple[object, ...]) -> None:
    for item in keep:
        if isinstance(item, Export):
            item.release()


class Completion:
    """An asynchronous copy in flight: an Event recorded right after it.

        done = rt.upload_async(host, buf)
        done.done()          # True once the copy has finished, never waits
        done.wait()          # blocks this thread until it has
        await done           # asyncio: polls, never blocks the loop

    Until completion is observed the host memory belongs to the device (do
    not read or write it) and the Completion holds the host buffer and the
    device object.  `event` orders other slots after the copy
    (rt.wait_event(done.event)).  close() releases the event."""

    __slots__ = ("event", "_keep", "__weakref__")

    event: Event
    _keep: Optional[Tuple[object, ...]]

    def __init__(self, event: Event, keep: Tuple[object, ...]) -> None:
        self.event, self._keep = event, keep

    def _finished(self) -> None:
        keep, self._keep = self._keep, None
        if keep is not None:
            _release_all(keep)

    def done(self) -> bool:
        """Whether the copy has finished (tf_event_query), without
        waiting."""
        if self._keep is None:
            return True
        if self.event.query():
            self._finished()
            return True
        return False

    def wait(self) -> None:
        """Block until the copy has finished (tf_event_synchronize)."""
        if self._keep is not None:
            self.event.synchronize()
            self._finished()

    async def _poll(self) -> None:
        delay = 20e-6
        while not self.done():
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5e-3)

    def __await__(self) -> Generator[Any, None, None]:
        return self._poll().__await__()

    def close(self) -> None:
        """Release the event; the held buffers go once the copy is observed
        done, or with this object."""
        self.event.close()

    def __repr__(self) -> str:
        state = "done" if self._keep is None else "pending"
        return f"<tenferro_gpu.Completion {state}>"


def _host_export(host: object, writable: bool) -> Export:
    """The held export of an asynchronous copy's host side."""
    if isinstance(host, HostRegistration):
        if host.closed:
            raise ValueError("the tenferro_gpu.HostRegistration is closed")
        host = host.obj
    elif isinstance(host, HostBuffer):
        host.ptr                # ValueError once closed
    return Export(host, writable=writable)


def _hold_copy(runtime: "Runtime", export: Export, device: Any) -> None:
    """Keep both sides of a queued copy whose completion cannot be
    observed (its event record failed) until the device has passed it
    (_holds.py)."""
    holds = _claims.host_claims(export.address, export.nbytes)
    keep: List[object] = []
    if holds:
        export.release()
    else:
        keep.append(export)
    alloc = getattr(device, "_alloc", None)
    if alloc is not None and not alloc.claims.freed:
        holds.append(alloc.claims)
    elif type(device) is not int:
        keep.append(device)
    _holds.retire(runtime, holds, keep)


class HostMixin:
    """Runtime methods for page-locked host memory and asynchronous
    copies."""

    __slots__ = ()

    if TYPE_CHECKING:
        def _active(self) -> Any: ...
        def _owner_clone(self) -> "Runtime": ...

    def host_alloc(self, nbytes: int) -> HostBuffer:
        """A HostBuffer of `nbytes` page-locked bytes from the runtime's
        pool (tf_host_alloc).  Raises InvalidArgumentError for 0,
        OutOfMemoryError when page-locked memory is exhausted."""
        nbytes = _capi.size(nbytes, "nbytes")
        owner = self._owner_clone()
        out = ctypes.c_void_p()
        try:
            _capi.check(_capi.api().tf_host_alloc(self._active(), nbytes, ctypes.byref(out)))
        except BaseException:
            owner.close()
            raise
        ptr = out.value or 0
        claims = _claims.Claims(functools.partial(_free_block, ptr, owner._identity,
                                                  weakref.ref(owner)), ptr, nbytes)
        try:
            host = _host_type(nbytes).from_address(ptr)
        except BaseException:
            claims.release()
            owner.close()
            raise
        exporter = _exporter(ptr, nbytes, functools.partial(_views_gone, claims, owner))
        host._owner, host._ptr, host._claims = owner, ptr, claims
        host._exporter, host._closed = exporter, False
        host._finalizer = weakref.finalize(host, _host_gone, exporter, claims, owner)
        _claims.track_host(claims)
        _handles.free_at_exit(host)
        return host

    def host_register(self, obj: object) -> HostRegistration:
        """Page-lock writable buffer `obj` (bytearray, NumPy array,
        memoryview, mmap; contiguous) for this runtime (tf_host_register)
        until the returned HostRegistration is closed.  Raises
        InvalidArgumentError for an empty buffer, one overlapping a range
        this runtime tracks, or memory already page-locked."""
        return HostRegistration(self, obj)        # type: ignore[arg-type]

    def download_async(self, src: Any, dst: object, *, offset: int = 0) -> Completion:
        """Queue a copy filling all of `dst` (a HostBuffer, a
        HostRegistration, or a writable view inside one) from device memory
        `src` (a DeviceBuffer, an address, another library's array) at
        byte `offset`, after the work queued on this slot
        (tf_download_async), and return its Completion."""
        return self._async(src, dst, offset, download=True)

    def upload_async(self, src: object, dst: Any, *, offset: int = 0) -> Completion:
        """Queue a copy of all of host memory `src` (a HostBuffer, a
        HostRegistration, or a view inside one) to device memory `dst` at
        byte `offset`, after the work queued on this slot
        (tf_upload_async), and return its Completion.  Keep `src`
        unchanged until then."""
        return self._async(dst, src, offset, download=False)

    def _async(self, device: Any, host: object, offset: int, download: bool) -> Completion:
        rt: "Runtime" = self       # type: ignore[assignment]
        name = "src" if download else "dst"
        export = _host_export(host, writable=download)
        try:
            event = Event._new(rt)
        except BaseException:
            export.release()
            raise
        try:
            address, foreign = _address(rt, device, offset, export.nbytes, name, not download)
        except BaseException:
            export.release()
            event.close()
            raise
        api = _capi.api()
        if download:
            st = api.tf_download_async(self._active(), address, export.address, export.nbytes)
        else:
            st = api.tf_upload_async(self._active(), export.address, address, export.nbytes)
        error = _capi.error(st) if st else None
        if foreign is not None:
            foreign.done(rt, queued=error is None)
        if error is not None:
            export.release()
            event.close()
            try:
                raise error
            finally:
                error = None      # no frame -> exception cycle
        try:
            _pool.record_uses(rt, device)
            event.record(rt)
        except errors.TenferroError:
            event.close()
            _hold_copy(rt, export, device)
            raise
        return Completion(event, (export, device))

    def host_stats(self) -> HostPoolStats:
        """HostPoolStats of this runtime (tf_host_stats)."""
        api = _capi.api()
        out = _capi.new_struct(_capi.HostPoolStatsStruct, api.tf_host_pool_stats_init)
        _capi.check(api.tf_host_stats(self._active(), ctypes.byref(out)))
        return HostPoolStats(**{f.name: getattr(out, f.name)
                                for f in dataclasses.fields(HostPoolStats)})

    def host_trim(self) -> None:
        """Give every cached block no stream still uses back to the driver
        (tf_host_trim)."""
        _capi.check(_capi.api().tf_host_trim(self._active()))


__all__ = ["Completion", "HostBuffer", "HostMixin", "HostPoolStats", "HostRegistration"]
