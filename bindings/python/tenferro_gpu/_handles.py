# SPDX-License-Identifier: MIT OR Apache-2.0
"""The library references the binding owns (tf_runtime, tf_event,
tf_module, tf_program), and why closing one on a thread never pulls it
from under a call on another.

NOTE calls hold their handle.  Each reference is a Ref (the extension's C
type, else _capi.RefFallback, a c_void_p) that its owner object (Runtime,
Stream, Event, Module, Program, Kernel) keeps in `_hc` until close().
Every library call passes the Ref itself as its handle argument, never the
integer, so the call's own argument keeps the Ref alive while the GIL is
released.  The C reference is released by the Ref's finalizer when the Ref
dies: close() only drops the owner's hold, so the release runs at once
when no call is in flight, else on the thread whose call returns last.
CPython's count of references to the Ref is the count of calls in flight,
plus one for the owner; it stays exact because no code of the binding keeps
a Ref anywhere else, nor in a local variable across a line that can raise
(a kept traceback would hold it).  A callable run by a call (with_context
and the enqueues) may close the runtime: its call holds the Ref, so the
release waits for it, and a last reference is never dropped inside a
callback.  At interpreter exit the memory still owned is given back and
then every owner drops its hold (_at_exit): a daemon thread still inside a
call keeps its reference.
"""

from __future__ import annotations

import atexit
import itertools
import weakref
from typing import Any, Callable, Dict, Optional

from . import _capi, errors


class Cell:
    """What a release reports: to close() while it waits (`closing`), else
    to nobody (quietly)."""

    __slots__ = ("closing", "error")

    def __init__(self) -> None:
        self.closing = False
        self.error: Optional[errors.TenferroError] = None


# Every owner, by creation order, for _at_exit.
_owners: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_order = itertools.count()


def own(owner: Any, handle: int, release: Callable[..., Any], *args: Any) -> Any:
    """Make `owner` own the reference `handle` holds: its `_hc` becomes the
    Ref and its `_cell` the Cell; release(handle, *args) runs, once, when
    the Ref dies.  Returns the Ref."""
    ref = _capi.Ref(handle)
    cell = Cell()
    weakref.finalize(ref, _released, cell, release, handle, args).atexit = False
    owner._hc, owner._cell = ref, cell
    _owners[next(_order)] = owner
    return ref


def _released(cell: Cell, release: Callable[..., Any], handle: int, args: Any) -> None:
    if not cell.closing:
        _capi.quietly(release, handle, *args)
        return
    st = release(handle, *args)
    if st:
        cell.error = _capi.error(st)


def close(owner: Any) -> None:
    """Drop `owner`'s hold on its Ref (idempotent).  When no call is in
    flight the release runs now and its failure is raised here; otherwise
    the last call to return runs it (and nobody hears of a failure)."""
    cell: Cell = owner._cell
    if owner._hc is None:
        return
    cell.closing = True
    try:
        owner._hc = None
    finally:
        cell.closing = False
    error, cell.error = cell.error, None
    if error is not None:
        try:
            raise error
        finally:
            error = None      # no frame -> exception cycle


# Memory still owned at exit (allocations, page-locked blocks,
# registrations), by creation order: each gives its memory back first,
# while its runtime is open.
_memory: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()


def free_at_exit(holder: Any) -> None:
    """At exit, holder._exit() runs before any reference is released."""
    _memory[next(_order)] = holder


# The same for holders that say when they go (a device allocation: cheaper
# than the weak dictionary's callback per entry).
_tracked: Dict[int, "weakref.ref[Any]"] = {}


def track(holder: Any) -> int:
    """free_at_exit for a holder that calls untrack(key) when it goes."""
    key = next(_order)
    _tracked[key] = weakref.ref(holder)
    return key


def untrack(key: int) -> None:
    _tracked.pop(key, None)


def _at_exit() -> None:
    """Give back the memory still owned, then close every owner, each
    newest first (a Stream before its runtime)."""
    holders = {key: _memory.get(key) for key in list(_memory.keys())}
    holders.update((key, ref()) for key, ref in list(_tracked.items()))
    for key in sorted(holders, reverse=True):
        holder = holders[key]
        if holder is not None:
            holder._exit()
    for key in sorted(_owners.keys(), reverse=True):
        owner = _owners.get(key)
        if owner is not None:
            owner._hc = None


# atexit runs the newest registration first: make weakref.finalize
# register its exit hook before this one, so that this one runs first and
# the finalizers of the memory (which run in weakref's) find their runtimes
# closed.
weakref.finalize(_at_exit, lambda: None)
atexit.register(_at_exit)
