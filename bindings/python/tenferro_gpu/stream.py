# SPDX-License-Identifier: MIT OR Apache-2.0
"""Stream: one stream slot of a runtime, bound, as a first-class object
(tf_runtime_bind_slot).

    stream = rt.bind_stream()          # or tenferro_gpu.Stream(rt, slot)
    buf.upload(data)                   # rt's calls: this thread's slot
    with stream:                       # rt's calls: the stream's slot,
        buf.upload(data)               # whatever thread runs them
        rt.sync()
    stream.sync()                      # its own calls: always its slot
    torch_stream = stream.torch_stream()   # torch.cuda.ExternalStream

The library picks the slot of an unbound runtime from the calling OS
thread.  Code that moves between threads while it works with one stream (a
task on a thread pool, an asyncio program running blocking calls in an
executor) would put an upload and the download after it on different
slots, which are not ordered with each other.  A Stream keeps one slot
whichever thread calls it.
"""

from __future__ import annotations

import contextvars
import ctypes
import importlib
from typing import Any, Dict, Optional, Tuple

from . import _capi, _handles, _leases, _runtimes
from ._current import current_streams
from .runtime import Runtime

# The previous current-stream maps, per thread or task: `with stream:` pushes
# (previous map, stream, older entry), leaving the block pops.  Kept apart
# from current_streams so that a call's lookup is one dict get.
_saved: contextvars.ContextVar[Tuple[Any, ...]] = contextvars.ContextVar(
    "tenferro_gpu_saved_streams", default=())


class Stream(Runtime):
    """Stream slot `slot` of `runtime` (default: the slot calls on it would
    use here now), bound: a handle of the runtime whose calls always use
    that slot's stream, from any thread (tf_runtime_bind_slot).

    It is a Runtime: every transfer, enqueue, launch and sync is a method
    (stream.upload(...), stream.sync(), stream.alloc(...)), and always runs
    on its slot.  `with stream:` makes it the current stream of its runtime
    in this thread or asyncio task, as torch.cuda.stream() and CuPy's
    `with stream:` do: calls on any unbound handle of the same runtime
    (rt.upload, buf.download, rt.sync, ...) then use it.  Blocks nest;
    leaving one restores the previous current stream.  A new thread starts
    with none.  Unlike a Runtime's, the `with` block does not close it:
    close() (or garbage collection) releases the bound handle.

    ptr is the CUstream as an integer; torch_stream() and cupy_stream()
    wrap it for PyTorch and CuPy.  Work they queue there is ordered with
    the library's work on the slot.
    """

    __slots__ = ("_slot", "_ptr", "_base")
    _kind = "Stream"

    _slot: int
    _ptr: Optional[int]
    _base: Runtime

    def __init__(self, runtime: Runtime, slot: Optional[int] = None) -> None:
        if slot is None:
            slot = runtime.current_slot
        slot = _capi.int32(slot, "slot")
        base = runtime._owner_clone()
        try:
            handle = runtime._get("tf_runtime_bind_slot", ctypes.c_void_p, slot) or 0
        except BaseException:
            base.close()
            raise
        self._slot, self._ptr, self._base = slot, None, base
        try:
            # One release drops the bound handle, then the base reference.
            self._own(handle, bound=True, release=_release_stream, extra=(base,))
        except BaseException:
            _capi.api().tf_runtime_release(handle)
            base.close()
            raise

    def close(self) -> None:
        """Release the bound handle and its reference to the runtime.
        Idempotent; with a call in flight, when it returns.  A `with
        stream:` block still open then fails its calls with ValueError."""
        try:
            _handles.close(self)
        finally:
            _leases.released(self)

    # ---- what it is -------------------------------------------------------

    @property
    def slot(self) -> int:
        """The stream slot it is bound to."""
        return self._slot

    @property
    def ptr(self) -> int:
        """The slot's CUstream as an integer (created at the first use of
        the slot; the same for the runtime's whole life)."""
        if self._ptr is None:
            self._ptr = super().stream()
        return self._ptr

    @property
    def runtime(self) -> Runtime:
        """The runtime it was bound from (borrowed: do not close it)."""
        return self._base

    def _owner_clone(self) -> Runtime:
        # Buffers and events made on a Stream keep the runtime, unbound, so
        # their own calls follow the current stream like the runtime's do.
        return self._base.clone()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stream):
            return NotImplemented
        return (self._identity, self._slot) == (other._identity, other._slot)

    def __hash__(self) -> int:
        return hash((self._identity, self._slot))

    def __repr__(self) -> str:
        if self.closed:
            return "<tenferro_gpu.Stream (closed)>"
        return (f"<tenferro_gpu.Stream slot={self._slot} of runtime "
                f"{self._identity} ptr=0x{self.ptr:x}>")

    # ---- the current stream -------------------------------------------------

    def __enter__(self) -> "Stream":
        self.handle                       # refuse a closed stream here
        previous = current_streams.get()
        streams: Dict[int, Stream] = dict(previous or {})
        streams[self._identity] = self
        _saved.set((previous, self, _saved.get()))
        current_streams.set(streams)
        return self

    def __exit__(self, *exc_info: object) -> None:
        saved = _saved.get()
        if not saved or saved[1] is not self:
            raise RuntimeError("leaving `with stream:` blocks out of order")
        current_streams.set(saved[0])
        _saved.set(saved[2])

    # ---- the names PyTorch and CuPy users expect --------------------------

    def synchronize(self) -> None:
        """sync(): wait for the work queued on this stream."""
        self.sync()

    def wait_stream(self, other: "Stream") -> None:
        """Make this stream wait, on the device, for the work queued on
        `other` so far (tf_slot_wait for a slot of the same runtime, else
        an event of other's runtime)."""
        if other._identity == self._identity:
            self.slot_wait(other.slot)
            return
        with other.event() as done:
            done.record(other)
            done.wait(self)

    def torch_stream(self) -> Any:
        """This stream as a torch.cuda.ExternalStream on the runtime's
        device (torch is imported here, not before)."""
        torch = importlib.import_module("torch")
        device = torch.device("cuda", self.ordinal)
        if hasattr(torch.cuda, "ExternalStream"):
            return torch.cuda.ExternalStream(self.ptr, device=device)
        return torch.cuda.get_stream_from_external(self.ptr, device=device)

    def cupy_stream(self) -> Any:
        """This stream as a cupy.cuda.ExternalStream on the runtime's device
        (cupy is imported here, not before)."""
        cupy = importlib.import_module("cupy")
        return cupy.cuda.ExternalStream(self.ptr, self.ordinal)


def current_stream(runtime: Runtime) -> Optional[Stream]:
    """The current Stream of `runtime` in this thread or task (the
    innermost `with stream:` of a stream of the same runtime), or None."""
    streams = current_streams.get()
    return None if streams is None else streams.get(runtime.identity)


def _release_stream(handle: int, identity: int, base: Runtime) -> int:
    try:
        return _runtimes.release(handle, identity)
    finally:
        base._hc = None          # the base's own release, when no call holds it
