# SPDX-License-Identifier: MIT OR Apache-2.0
"""Work on the slot streams: cuBLAS, any library, ordering between slots,
events and retirement (include/tenferro_gpu.h, "Work on the slot
streams")."""

from __future__ import annotations

import ctypes
import dataclasses
import enum
from typing import TYPE_CHECKING, Any, Callable, Optional

from . import _callbacks, _capi
from ._owned import Owned

if TYPE_CHECKING:
    from .runtime import Runtime


class PointerMode(enum.IntEnum):
    """enum tf_cublas_pointer_mode: where alpha, beta and scalar results
    live for the cuBLAS calls of one cublas_enqueue."""
    HOST = 0
    DEVICE = 1


@dataclasses.dataclass(frozen=True)
class RetirementStats:
    """A consistent snapshot of a runtime's retirement counters
    (tf_retirement_stats).  Every accepted retirement (queued: deferred;
    never queued, once its stream wait returned: barrier_fallbacks) is in
    exactly one of released, leaked and in_flight: deferred +
    barrier_fallbacks == released + leaked + in_flight in every snapshot."""
    capacity: int
    deferred: int
    released: int
    barrier_fallbacks: int
    leaked: int
    in_flight: int
    max_in_flight: int


def cublas_symbol(name: str) -> int:
    """Address of a function of the cuBLAS the library loaded
    (tf_cublas_symbol), as an integer: the binding calls the same cuBLAS
    that made the slots' handles and needs none of its own.  `name` must
    start with "cublas".  Raises LibraryNotFoundError (no cuBLAS),
    NotSupportedError (no such symbol), InvalidArgumentError."""
    out = ctypes.c_void_p()
    _capi.check(_capi.api().tf_cublas_symbol(name.encode(), ctypes.byref(out)))
    return out.value or 0


def cublas_function(name: str, restype: Any, *argtypes: Any) -> Any:
    """The cuBLAS function `name` of the library's cuBLAS as a ctypes
    function of the given prototype:

        sgemm = cublas_function("cublasSgemm_v2", c_int, c_void_p, c_int, ...)
    """
    return ctypes.CFUNCTYPE(restype, *argtypes)(cublas_symbol(name))


def cublas_version() -> tuple[int, int, int]:
    """Version of the library's cuBLAS as (major, minor, patch)."""
    out = ctypes.c_int32()
    _capi.check(_capi.api().tf_cublas_version(ctypes.byref(out)))
    n = out.value
    return (n // 10000, n // 100 % 100, n % 100)


class Event(Owned):
    """A CUDA event of one runtime (tf_event), for ordering work across
    slots, runtimes of one device, or with the host:

        done = rt.event()
        done.record()              # after the work queued on this slot
        other.wait_event(done)     # the other handle's slot waits, on the device
        done.synchronize()         # the host waits

    Until its first record, waiting for it returns at once.  Each Event
    object owns one reference (close() or garbage collection releases it);
    clone() adds one.  The event keeps its runtime alive.
    """

    __slots__ = ("_runtime",)
    _kind = "Event"

    _runtime: "Runtime"

    def __init__(self, runtime: "Runtime", handle: int) -> None:
        self._runtime = runtime
        self._own(handle, _release_event, runtime)

    @classmethod
    def _new(cls, runtime: "Runtime") -> "Event":
        owner = runtime._owner_clone()
        out = ctypes.c_void_p()
        try:
            _capi.check(_capi.api().tf_event_new(owner._ref(), ctypes.byref(out)))
        except BaseException:
            owner.close()
            raise
        return cls(owner, out.value or 0)

    def clone(self) -> "Event":
        """Another Event object on the same event (tf_event_retain)."""
        owner = self._runtime.clone()
        try:
            _capi.check(_capi.api().tf_event_retain(self._ref()))
        except BaseException:
            owner.close()
            raise
        return Event(owner, self._handle)

    def record(self, runtime: Optional["Runtime"] = None) -> None:
        """Record on the slot calls on `runtime` (default: the runtime that
        made the event) use here: it completes when the work queued there
        before this call is done."""
        rt = runtime if runtime is not None else self._runtime
        _capi.check(_capi.api().tf_event_record(rt._active(), self._ref()))

    def wait(self, runtime: Optional["Runtime"] = None) -> None:
        """Make the slot calls on `runtime` (default: the event's runtime)
        use here wait, on the device, for the latest record."""
        rt = runtime if runtime is not None else self._runtime
        _capi.check(_capi.api().tf_event_wait(rt._active(), self._ref()))

    def synchronize(self) -> None:
        """Block until the latest record is done."""
        _capi.check(_capi.api().tf_event_synchronize(self._ref()))

    def query(self) -> bool:
        """Whether the latest record is done (or there was none), without
        waiting."""
        out = ctypes.c_int32()
        _capi.check(_capi.api().tf_event_query(self._ref(), ctypes.byref(out)))
        return bool(out.value)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"0x{self._handle:x}"
        return f"<tenferro_gpu.Event {state}>"


def _release_event(handle: int, runtime: "Runtime") -> int:
    try:
        return int(_capi.api().tf_event_release(handle))
    finally:
        runtime._hc = None       # its own release, when no call holds it


def _keep(*objects: object) -> None:
    """The release of keep_until_done: dropping the references is the work."""


class StreamWorkMixin:
    """Runtime methods for work on the slot streams."""

    __slots__ = ()

    if TYPE_CHECKING:
        def _active(self) -> Any: ...

    def cublas_enqueue(self, fn: Callable[..., Any], /, *args: Any,
                       pointer_mode: int = PointerMode.HOST, **kwargs: Any) -> None:
        """Call fn(handle, stream, *args, **kwargs) with this thread's slot's
        cuBLAS handle (a cublasHandle_t) and stream (a CUstream), both
        integers, while the primary context is current and the slot's lock
        held (tf_cublas_enqueue).  fn returns the cublasStatus_t of its
        cuBLAS calls: 0 or None for success, anything else raises
        ProviderError (code domain CUBLAS).  An exception fn raises is
        re-raised here unchanged.  Use cublas_function() (or tenferro_gpu.blas)
        for the cuBLAS functions.  fn must not keep the handle, nor change
        its stream or workspace; calling cublas_enqueue or stream_enqueue
        again from fn raises RuntimeStateError."""
        mode = _capi.int32(pointer_mode, "pointer_mode")
        frame = _callbacks.new_frame(fn, args, kwargs)
        st = _capi.api().tf_cublas_enqueue(self._active(), mode, _callbacks.CUBLAS, frame)
        if st:
            _callbacks.reraise(frame)
            _capi.fail(st)

    def stream_enqueue(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call fn(stream, *args, **kwargs) with this thread's slot stream (a
        CUstream, as an integer) while the primary context is current and
        the slot's lock held (tf_stream_enqueue), for any library's work.
        Returns what fn returns; an exception fn raises is re-raised here."""
        frame = _callbacks.new_frame(fn, args, kwargs)
        st = _capi.api().tf_stream_enqueue(self._active(), _callbacks.STREAM, frame)
        if st:
            _callbacks.reraise(frame)
            _capi.fail(st)
        return frame[_callbacks.RESULT]

    def slot_wait(self, other_slot: int) -> None:
        """Make this thread's slot stream wait, on the device, for the work
        queued on slot `other_slot` before this call (tf_slot_wait)."""
        other_slot = _capi.int32(other_slot, "other_slot")
        _capi.check(_capi.api().tf_slot_wait(self._active(), other_slot))

    def event(self) -> Event:
        """A new Event of this runtime (tf_event_new)."""
        return Event._new(self)      # type: ignore[arg-type]

    def record_event(self, event: Event) -> None:
        """event.record(self): record on this handle's slot."""
        event.record(self)           # type: ignore[arg-type]

    def wait_event(self, event: Event) -> None:
        """event.wait(self): this handle's slot waits for the event."""
        event.wait(self)             # type: ignore[arg-type]

    def retire(self, release: Callable[..., object], /, *args: Any) -> None:
        """Call release(*args) once the device has finished the work queued
        so far on this thread's slot, without making the host wait
        (tf_workspace_retire).  It runs exactly once, on the thread of a
        later retire, poll_retirements() or sync() on any slot, or at the
        runtime's teardown; it may call the library, but not this runtime
        when it runs from the teardown.  What it raises goes to
        sys.unraisablehook.  If the library cannot retire (any error but
        InvalidArgumentError), release never runs and the error is
        raised.  Until it runs, release and args are kept, and with them
        what they reference: a Runtime or DeviceBuffer among them keeps the
        runtime alive until a later sync (NOTE the last reference drains in
        _runtimes.py)."""
        st = _callbacks.retirement(self, release, args)      # type: ignore[arg-type]
        _capi.check(st)

    def keep_until_done(self, *objects: object) -> None:
        """Keep references to `objects` (arrays, tensors, buffers that queued
        work still reads or writes) until the device has finished the work
        queued so far on this thread's slot; see retire()."""
        self.retire(_keep, *objects)

    def poll_retirements(self) -> None:
        """Run the releases of every retirement the device has passed, on
        all slots, without waiting (tf_workspace_poll)."""
        _capi.check(_capi.api().tf_workspace_poll(self._active()))

    def retirement_stats(self) -> RetirementStats:
        """RetirementStats of this runtime (tf_workspace_stats)."""
        api = _capi.api()
        out = _capi.new_struct(_capi.RetirementStatsStruct, api.tf_retirement_stats_init)
        _capi.check(api.tf_workspace_stats(self._active(), ctypes.byref(out)))
        return RetirementStats(**{f.name: getattr(out, f.name)
                                  for f in dataclasses.fields(RetirementStats)})
