# SPDX-License-Identifier: MIT OR Apache-2.0
"""Runtime: one device's primary context, its stream slots and what hangs
off them (include/tenferro_gpu.h, "Runtime")."""

from __future__ import annotations

import ctypes
import enum
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, NoReturn, Optional, Tuple, Type, TypeVar

from . import _callbacks, _capi, _handles, _leases, _runtimes
from ._current import current_streams
from .devices import DeviceProperties, _query
from .host import HostMixin
from .kernels import KernelsMixin
from .memory import TransfersMixin
from .graph import GraphMixin
from .pool import PoolMixin
from .stream_work import StreamWorkMixin

if TYPE_CHECKING:
    from .stream import Stream

R = TypeVar("R")
T = TypeVar("T")


class Capability(enum.IntEnum):
    """enum tf_capability: what Runtime.supports() answers for."""
    NATIVE_MODULES = 1
    RUNTIME_COMPILATION = 2
    RAW_STREAM = 3
    SAME_DEVICE_COPY = 4
    PEER_COPY = 5
    CUBLAS = 6
    STREAM_ORDERED_ALLOC = 7


_OPTION_TYPES = {
    "stream_slots": _capi.uint32,
    "cublas_workspace_bytes": _capi.uint64,
    "retirement_capacity": _capi.uint32,
    "download_threads": _capi.uint32,
    "download_chunk_bytes": _capi.uint32,
    "memory_release_threshold": _capi.uint64,     # 1.2
    "memory_reserved_limit": _capi.uint64,        # 1.2
}


def _options(api: Any, given: Dict[str, int]) -> _capi.RuntimeOptionsStruct:
    """A tf_runtime_options at the library's defaults, with `given` set."""
    opts = _capi.new_struct(_capi.RuntimeOptionsStruct, api.tf_runtime_options_init)
    for name, value in given.items():
        setattr(opts, name, _OPTION_TYPES[name](value, name))
    return opts


class Runtime(StreamWorkMixin, TransfersMixin, PoolMixin, HostMixin, KernelsMixin,
              GraphMixin):
    """A reference to a tenferro-gpu runtime (tf_runtime *).

    Runtime(ordinal) creates a runtime on a device; keyword options override
    the library's defaults (None keeps the default): stream_slots,
    cublas_workspace_bytes, retirement_capacity, download_threads,
    download_chunk_bytes, and the device memory pool's
    memory_release_threshold and memory_reserved_limit (tf_runtime_options
    documents each; the pool's options are the device's, docs/memory.md):

        with tenferro_gpu.Runtime(0, stream_slots=4) as rt:
            stream = rt.bind_stream()      # one slot, whatever thread calls
            with stream:                   # rt's calls here use that slot
                rt.with_context(work)
                rt.sync()

    Each Runtime object owns one reference.  close() (or leaving the `with`
    block) releases it; a Runtime that is garbage-collected or still open at
    interpreter exit is released then.  The runtime itself is torn down
    when its last reference goes, clones and bound handles included.

    A Runtime may be used from any number of threads at once.  A call works
    on the current Stream of this runtime (`with stream:`, per thread and
    per asyncio task), else on the calling thread's own stream slot (its
    sequence number modulo the slot count).  bind_stream() gives a Stream
    that uses one fixed slot from any thread; bind_slot() a plain bound
    handle.

    close() while another thread is inside a call on this Runtime is safe:
    the reference is released when that call returns ("NOTE calls hold
    their handle" in _handles.py).

    Its methods, by the header's sections: queries and streams (here);
    cuBLAS, any library's work, events and retirement (stream_work.py);
    device memory and transfers (memory.py); the device's memory pool
    (pool.py); graph capture (graph.py); page-locked host memory and
    asynchronous copies (host.py); NVRTC, modules and launches (kernels.py).
    """

    __slots__ = ("_handle", "_hc", "_cell", "_identity", "_bound", "_ordinal",
                 "_shared", "_leases", "_parent", "__weakref__")
    _kind = "Runtime"

    _handle: int
    # The Ref every call passes (_handles.py); None once closed.
    _hc: Any
    _cell: _handles.Cell
    _identity: int
    # A bound handle (bind_slot, Stream) always uses its own slot; other
    # handles use the current Stream of their runtime, if any.
    _bound: bool
    _ordinal: Optional[int]
    # The owner its allocations share, and as an owner its leases and the
    # Runtime that made it (_leases.py).
    _shared: Optional["Runtime"]
    _leases: int
    _parent: "weakref.ref[Runtime]"

    def __init__(self, ordinal: int = 0, *, stream_slots: Optional[int] = None,
                 cublas_workspace_bytes: Optional[int] = None,
                 retirement_capacity: Optional[int] = None,
                 download_threads: Optional[int] = None,
                 download_chunk_bytes: Optional[int] = None,
                 memory_release_threshold: Optional[int] = None,
                 memory_reserved_limit: Optional[int] = None) -> None:
        api = _capi.api()
        ordinal = _capi.int32(ordinal, "ordinal")
        given = {name: value for name, value in (
            ("stream_slots", stream_slots),
            ("cublas_workspace_bytes", cublas_workspace_bytes),
            ("retirement_capacity", retirement_capacity),
            ("download_threads", download_threads),
            ("download_chunk_bytes", download_chunk_bytes),
            ("memory_release_threshold", memory_release_threshold),
            ("memory_reserved_limit", memory_reserved_limit)) if value is not None}
        out = ctypes.c_void_p()
        if given:
            opts = _options(api, given)
            st = api.tf_runtime_new_with_options(ordinal, ctypes.byref(opts),
                                                 ctypes.byref(out))
        else:
            st = api.tf_runtime_new(ordinal, ctypes.byref(out))
        _capi.check(st)
        handle = out.value or 0
        try:
            self._own(handle, bound=False)
        except BaseException:
            api.tf_runtime_release(handle)
            raise

    def _own(self, handle: int, *, bound: bool,
             release: Callable[..., int] = _runtimes.release,
             extra: Tuple[Any, ...] = (), identity: Optional[int] = None) -> None:
        """Own the reference `handle` holds, released by release(handle,
        identity, *extra); `identity` is asked for unless given (a clone
        knows it).  On failure nothing is owned (the caller releases it)."""
        if identity is None:
            out = ctypes.c_uint64()
            _capi.check(_capi.api().tf_runtime_identity(handle, ctypes.byref(out)))
            identity = out.value
        self._identity = identity
        self._handle = handle
        self._bound = bound
        self._ordinal = None
        self._shared = None
        self._leases = 0
        ref = _handles.own(self, handle, release, identity, *extra)
        _runtimes.added(identity, ref)

    @classmethod
    def _adopt(cls: Type[T], handle: int, *, bound: bool = False,
               identity: Optional[int] = None) -> T:
        """A `cls` owning the reference `handle` already holds."""
        rt = cls.__new__(cls)
        try:
            rt._own(handle, bound=bound, identity=identity)  # type: ignore[attr-defined]
        except BaseException:
            _capi.api().tf_runtime_release(handle)
            raise
        return rt

    @classmethod
    def from_handle(cls, handle: int) -> "Runtime":
        """A Runtime for a tf_runtime * made elsewhere (C code, another
        binding), given as an integer address.  It takes a reference of its
        own (tf_runtime_retain); the caller keeps and releases theirs."""
        handle = _capi.uint64(handle, "handle")
        _capi.check(_capi.api().tf_runtime_retain(handle))
        return Runtime._adopt(handle)

    # ---- lifetime --------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._hc is None

    def _closed_error(self) -> NoReturn:
        raise ValueError(f"the tenferro_gpu.{self._kind} is closed")

    def _fail(self, st: int) -> NoReturn:
        """Raise for status `st` of a call given this handle's Ref; a
        handle closed since the caller looked answers CLOSED (extension) or
        a refused NULL (ctypes)."""
        if st == _capi.CLOSED or (st == 1 and self._hc is None):
            self._closed_error()
        _capi.fail(st)

    @property
    def handle(self) -> int:
        """The tf_runtime * as an integer, for C code.  Borrowed: valid
        while this Runtime is open.  Raises ValueError once closed."""
        if self._hc is None:
            self._closed_error()
        return self._handle

    def _target(self) -> "Runtime":
        """The handle this call uses: the current Stream of this runtime in
        this thread or task (see Stream), unless self is bound; else self."""
        if not self._bound:
            streams = current_streams.get()
            if streams is not None:
                return streams.get(self._identity, self)
        return self

    def _active(self) -> Any:
        """The Ref of the handle this call uses, for the call to pass (and
        hold); ValueError once closed."""
        rt = self._target()
        ref = rt._hc
        if ref is None:
            rt._closed_error()
        return ref

    def _ref(self) -> Any:
        """This handle's own Ref (no current stream), as _active()."""
        ref = self._hc
        if ref is None:
            self._closed_error()
        return ref

    def close(self) -> None:
        """Release this reference (tf_runtime_release).  Idempotent.  With
        a call in flight on another thread, the reference is released when
        that call returns.  The last reference's release synchronizes the
        runtime's streams and frees what it owns; failures there go to the
        log."""
        try:
            _handles.close(self)
        finally:
            _leases.released(self)

    def __enter__(self: T) -> T:
        self.handle   # type: ignore[attr-defined]  # refuse a closed runtime here
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def clone(self) -> "Runtime":
        """Another Runtime on the same runtime, with its own reference
        (tf_runtime_retain): same identity, state and slots (the same slot,
        for a bound handle)."""
        _capi.check(_capi.api().tf_runtime_retain(self._ref()))
        return Runtime._adopt(self._handle, bound=self._bound, identity=self._identity)

    def _owner_clone(self) -> "Runtime":
        """The reference a buffer or event made through this handle keeps:
        a clone (of a Stream's runtime, so that the object's own calls
        follow the current stream)."""
        return self.clone()

    __copy__ = clone

    def bind_slot(self, slot: int) -> "Runtime":
        """A Runtime on the same runtime whose calls use stream slot `slot`
        whatever thread makes them (tf_runtime_bind_slot); `with` closes it.
        bind_stream() gives the same as a Stream.  Raises
        InvalidArgumentError for a slot outside 0 .. slot_count - 1."""
        slot = _capi.int32(slot, "slot")
        handle = self._get("tf_runtime_bind_slot", ctypes.c_void_p, slot)
        return Runtime._adopt(handle or 0, bound=True)

    def bind_stream(self, slot: Optional[int] = None) -> "Stream":
        """A Stream: stream slot `slot` (default: the slot calls would use
        here now) bound, used from any thread; `with stream:` makes it the
        current stream of this runtime's calls.  See Stream."""
        from .stream import Stream
        return Stream(self, slot)

    # ---- queries ----------------------------------------------------------

    def _get(self, fn_name: str, c_type: Type[Any], *args: object) -> Any:
        """fn_name(handle, *args, &out) -> out, raising on failure."""
        value = c_type()
        _capi.check(getattr(_capi.api(), fn_name)(self._active(), *args,
                                                 ctypes.byref(value)))
        return value.value

    @property
    def identity(self) -> int:
        """Number fresh for every new runtime in this process, equal for
        its clones and bound handles.  A cache key; it grants nothing."""
        self.handle
        return self._identity

    @property
    def allocation_domain(self) -> int:
        """Device memory made through this runtime belongs to this domain."""
        return int(self._get("tf_runtime_allocation_domain", ctypes.c_uint64))

    @property
    def device(self) -> DeviceProperties:
        """DeviceProperties of the runtime's device (no driver call)."""
        return _query(lambda api, out: int(api.tf_runtime_device_info(self._ref(), out)))

    @property
    def ordinal(self) -> int:
        """The device's ordinal (device.ordinal, cached)."""
        if self._ordinal is None:
            self._ordinal = self.device.ordinal
        return self._ordinal

    @property
    def primary_context(self) -> int:
        """The device's primary context (a CUcontext) as an integer.  Valid
        while the runtime lives; prefer with_context() to making it current
        yourself."""
        return int(self._get("tf_runtime_primary_context", ctypes.c_void_p) or 0)

    @property
    def slot_count(self) -> int:
        """Number of stream slots."""
        return int(self._get("tf_runtime_slot_count", ctypes.c_int32))

    @property
    def current_slot(self) -> int:
        """Stream slot this call uses: the current Stream's, a bound
        handle's, else the calling thread's."""
        return int(self._get("tf_runtime_current_slot", ctypes.c_int32))

    def supports(self, capability: int) -> bool:
        """Whether the runtime supports a Capability (an unknown value
        answers False)."""
        capability = _capi.int32(capability, "capability")
        return bool(self._get("tf_runtime_supports", ctypes.c_int32, capability))

    # ---- streams and context ----------------------------------------------

    def stream(self) -> int:
        """The CUstream (as an integer) of the slot this call uses: the
        current Stream's (no library call), else this handle's slot: a bound
        handle's, or the calling thread's, created on first use and never
        replaced while the runtime lives.  Work enqueued on it is ordered
        with the library's own work on that slot.  Stream.torch_stream()
        and Stream.cupy_stream() wrap it for PyTorch and CuPy."""
        rt = self               # _target(), inlined: a method call costs ~80 ns
        if not self._bound:
            streams = current_streams.get()
            if streams is not None:
                rt = streams.get(self._identity, self)
                if rt is not self:
                    return rt.ptr     # type: ignore[attr-defined, no-any-return]
        # The Ref goes to the call inline: NOTE calls hold their handle.
        if rt._hc is None:
            rt._closed_error()
        sp = _capi.speedups
        if sp is not None:
            value: int = sp.stream(rt._hc)
            if value < 0:
                rt._fail(value if value == _capi.CLOSED else -value)
            return value
        try:
            out, ref = _local.pointer
        except AttributeError:
            out, ref = _local.pointer = _new_pointer()
        st = _capi.fast.stream(rt._hc, ref)
        if st:
            rt._fail(st)
        return out.value or 0

    def slot_stream(self, slot: int) -> int:
        """As stream(), for an explicit slot 0 .. slot_count - 1."""
        slot = _capi.int32(slot, "slot")
        return int(self._get("tf_runtime_slot_stream", ctypes.c_void_p, slot) or 0)

    def with_context(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        """Call fn(*args, **kwargs) with the runtime's primary context
        current on this thread and return what it returns.

        The thread's previous current context (none included) is current
        again afterwards, however fn ends.  An exception fn raises is
        re-raised here unchanged (the library sees the callback fail with
        code -1 first).  fn may call this library, with_context included.
        """
        if self._hc is None:
            self._closed_error()
        frame = _callbacks.new_frame(fn, args, kwargs)
        sp = _capi.speedups
        if sp is not None:
            st = sp.with_context(self._hc, frame)
        else:
            st = _capi.fast.with_context(self._hc, _callbacks.WITH_CONTEXT,
                                         ctypes.py_object(frame))
        if st:
            _callbacks.reraise(frame)
            self._fail(st)
        return frame[3]    # type: ignore[no-any-return]  # the RESULT slot

    def sync(self) -> None:
        """Wait for the work queued on this call's slot stream (the current
        Stream's, a bound handle's, else the calling thread's), then run the
        workspace retirements the device has passed.  Other slots are not
        waited for."""
        rt = self               # _target(), inlined: a method call costs ~80 ns
        if not self._bound:
            streams = current_streams.get()
            if streams is not None:
                rt = streams.get(self._identity, self)
        if rt._hc is None:
            rt._closed_error()
        sp = _capi.speedups
        st = sp.sync(rt._hc) if sp is not None else _capi.fast.sync(rt._hc)
        if st:
            rt._fail(st)

    def __repr__(self) -> str:
        if self.closed:
            return f"<tenferro_gpu.{self._kind} (closed)>"
        return (f"<tenferro_gpu.{self._kind} identity={self._identity} "
                f"device={self.device.ordinal} handle=0x{self._handle:x}>")


# This thread's out-parameter of stream() and a ready byref of it: one per
# thread, since the GIL is released during the call.
_local = threading.local()


def _new_pointer() -> Tuple[ctypes.c_void_p, Any]:
    out = ctypes.c_void_p()
    return out, ctypes.byref(out)
