# SPDX-License-Identifier: MIT OR Apache-2.0
"""The device's memory pool behind tf_alloc (include/tenferro_gpu.h,
"Device memory pool"; docs/memory.md), with torch.cuda's names:

    stats = rt.memory_stats()           # MemoryStats: the device's counters
    rt.reset_peak_memory_stats()        # peaks restart at the current values
    rt.empty_cache()                    # give unused memory back to the driver
    buf.record_use(other)               # buf's free waits for other's slot

The pool is the device's, shared by its runtimes: every runtime of the
device reads the same counters.  A buffer is freed in order on the slot
that allocated it; work on another slot that uses it must be finished first
or recorded (tf_memory_record_use).  The binding's own calls that queue
work with a DeviceBuffer on a slot other than its own record that use
themselves (record_uses below); work you queue yourself there (a raw
address, another library's stream) needs record_use.
"""

from __future__ import annotations

import ctypes
import dataclasses
import threading
from typing import TYPE_CHECKING, Any, Dict

from . import _capi
from .buffer import DeviceBuffer

if TYPE_CHECKING:
    from .runtime import Runtime


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    """A consistent snapshot of the counters of a device's memory pool
    (tf_memory_stats), like torch.cuda.memory_stats(): in_use_bytes <=
    reserved_bytes <= reserved_peak, in_use_bytes <= in_use_peak, and
    allocations - frees live allocations whose sizes add up to
    in_use_bytes.  cached is False where the device has no memory pools
    (tf_alloc then uses cuMemAlloc, and reserved is what is in use)."""
    cached: bool
    reserved_bytes: int
    reserved_peak: int
    in_use_bytes: int
    in_use_peak: int
    allocations: int
    frees: int
    oom_retries: int
    oom_failures: int
    trims: int
    release_threshold: int
    reserved_limit: int


_FIELDS = tuple(f.name for f in dataclasses.fields(MemoryStats))


def _address_of(device: Any) -> int:
    """The device address record_use notes: the start of a DeviceBuffer's
    allocation (of any view: the use is the allocation's), 0 for an empty
    one (nothing to record), else an integer address."""
    if isinstance(device, DeviceBuffer):
        device.ptr                      # ValueError once freed
        return device._alloc.ptr or 0
    return _capi.uint64(device, "address")


class PoolMixin:
    """Runtime methods for the device's memory pool."""

    __slots__ = ()

    if TYPE_CHECKING:
        def _active(self) -> Any: ...
        def _ref(self) -> Any: ...

    def memory_stats(self) -> MemoryStats:
        """The device's pool counters now (tf_memory_stats)."""
        api = _capi.api()
        out = _capi.new_struct(_capi.MemoryPoolStatsStruct, api.tf_memory_pool_stats_init)
        _capi.check(api.tf_memory_stats(self._ref(), ctypes.byref(out)))
        values = {name: getattr(out, name) for name in _FIELDS}
        values["cached"] = bool(values["cached"])
        return MemoryStats(**values)

    def reset_peak_memory_stats(self) -> None:
        """Restart reserved_peak and in_use_peak at the current values
        (tf_memory_reset_peak)."""
        _capi.check(_capi.api().tf_memory_reset_peak(self._ref()))

    def empty_cache(self, keep_bytes: int = 0) -> None:
        """Give the pool's unused memory back to the driver until it keeps
        at most `keep_bytes` (tf_memory_trim), after waiting for the work
        queued on every slot of the device's runtimes, like
        torch.cuda.empty_cache().  Memory in use stays."""
        keep = _capi.uint64(keep_bytes, "keep_bytes")
        _capi.check(_capi.api().tf_memory_trim(self._ref(), keep))

    def record_use(self, device: Any) -> None:
        """Note that the slot this call uses runs work, queued there after
        the buffer's own, that reads or writes `device` (a DeviceBuffer or
        a view of one, or an address inside a tf_alloc allocation of the
        device): its free from another slot then waits for that work on the
        device (tf_memory_record_use, as torch's Tensor.record_stream).
        Call it after queueing the work.  InvalidArgumentError for an
        address outside every live allocation."""
        address = _address_of(device)
        if address == 0 and isinstance(device, DeviceBuffer):
            return
        _capi.check(_capi.api().tf_memory_record_use(self._active(), address))


# The slot of each unbound runtime (by identity) this thread's calls use:
# fixed per thread (tf_runtime_current_slot).
_thread_slots = threading.local()


def call_slot(rt: "Runtime") -> int:
    """The stream slot a call on `rt` uses here: the current Stream's or a
    bound handle's, else the calling thread's (asked once per thread)."""
    target = rt._target()
    slot = getattr(target, "_slot", None)
    if slot is not None:
        return int(slot)
    if target._bound:
        return target.current_slot
    try:
        cache: Dict[int, int] = _thread_slots.slots
    except AttributeError:
        cache = _thread_slots.slots = {}
    found = cache.get(target._identity)
    if found is None:
        found = cache[target._identity] = target.current_slot
    return found


def record_uses(rt: "Runtime", *operands: Any) -> None:
    """After the binding queued work on the slot a call on `rt` uses: note
    that slot's use of each DeviceBuffer operand allocated on another slot
    or by another runtime, so that its free waits for the work.  Other
    operands (addresses, other libraries' arrays) are the caller's to
    order."""
    slot = -1
    for operand in operands:
        if type(operand) is not DeviceBuffer:
            continue
        alloc = operand._alloc
        if alloc.ptr is None or alloc.nbytes == 0:
            continue
        if slot < 0:
            slot = call_slot(rt)
        if alloc.slot == slot and alloc.owner._identity == rt._identity:
            continue
        _capi.check(_capi.api().tf_memory_record_use(rt._active(), alloc.ptr))


__all__ = ["MemoryStats", "PoolMixin"]
