# SPDX-License-Identifier: MIT OR Apache-2.0
"""Graph capture (include/tenferro_gpu.h, "Graph capture"; docs/graphs.md),
as torch.cuda.graph does it: a `with` block captures the work queued on
one slot, and the Graph runs it again with one launch.

    with rt.graph() as g:                 # captures the slot rt's calls use here
        rt.copy(x, y)                     # captured, not run
        blas.matmul(rt, a, b, c, m, n, k)
    g.launch()                            # runs both; again and again
    with rt.graph(g):                     # capture anew into g (updated in
        ...                               # place when only addresses changed)
    g.close()                             # or `with g:`, or garbage collection

While the slot captures, calls that would wait for the device or promise
what a launch cannot repeat (sync, download, upload, alloc, free, ...)
raise RuntimeStateError with the library's message; the capture stays
intact.  An exception that leaves the block aborts the capture
(tf_graph_capture_abort) and propagates.
"""

from __future__ import annotations

import ctypes
import sys
from types import TracebackType
from typing import TYPE_CHECKING, Any, Optional, Type

from . import _capi, _handles, pool
from ._owned import Owned

if TYPE_CHECKING:
    from .runtime import Runtime


def _release_graph(handle: int, runtime: "Runtime") -> int:
    try:
        return int(_capi.api().tf_graph_release(handle))
    finally:
        runtime._hc = None       # its own release, when no call holds it


class Graph(Owned):
    """An executable graph of one runtime (tf_graph): the work one capture
    recorded.  launch() queues it on the slot calls on a runtime use;
    close() (or `with`, or garbage collection) releases it, after the
    launches already queued (the library keeps what they need).  It keeps
    its runtime alive.  updated_in_place says how the last re-capture into
    it ended: True when the graph was updated in place, False when it was
    instantiated anew (None before any)."""

    __slots__ = ("_runtime", "_capturing", "updated_in_place")
    _kind = "Graph"

    _runtime: "Runtime"
    _capturing: bool
    updated_in_place: Optional[bool]

    def __init__(self, runtime: "Runtime") -> None:
        self._runtime = runtime
        self._capturing = True
        self._hc, self._cell, self._handle = None, _handles.Cell(), 0
        self.updated_in_place = None

    def _closed_error(self) -> None:
        if self._capturing and self._hc is None:
            raise ValueError("the tenferro_gpu.Graph is still being captured: "
                             "launch it after the `with` block")
        super()._closed_error()

    def launch(self, runtime: Optional["Runtime"] = None) -> None:
        """Queue the graph on the slot calls on `runtime` (default: the
        runtime that captured it) use here, after that slot's earlier work
        and the graph's previous launch, and return (tf_graph_launch)."""
        rt = runtime if runtime is not None else self._runtime
        _capi.check(_capi.api().tf_graph_launch(rt._active(), self._ref()))

    def clone(self) -> "Graph":
        """Another Graph object on the same graph (tf_graph_retain)."""
        owner = self._runtime.clone()
        try:
            _capi.check(_capi.api().tf_graph_retain(self._ref()))
        except BaseException:
            owner.close()
            raise
        other = Graph(owner)
        other._adopt(self._handle)
        return other

    def _adopt(self, handle: int) -> None:
        self._capturing = False
        self._own(handle, _release_graph, self._runtime)

    def _abandon(self) -> None:
        """A first capture that made no graph: closed, its runtime
        reference dropped."""
        if self._capturing:
            self._capturing = False
            self._runtime.close()

    def __repr__(self) -> str:
        state = "capturing" if self._capturing else "closed" if self.closed else \
            f"handle=0x{self._handle:x}"
        return f"<tenferro_gpu.Graph {state}>"


class Capture:
    """What Runtime.graph() returns: a context manager whose block captures
    the work queued on one slot (the slot the runtime's calls use where the
    block starts, held by a bound handle, so the block may end on another
    thread).  Entering begins (tf_graph_capture_begin) and gives the Graph;
    leaving ends the capture into it (tf_graph_capture_end, or
    tf_graph_capture_update for an existing graph), or, when an exception
    leaves the block, aborts it (tf_graph_capture_abort)."""

    __slots__ = ("_runtime", "_graph", "_slot_handle")

    def __init__(self, runtime: "Runtime", graph: Optional[Graph]) -> None:
        if graph is not None:
            graph._ref()                 # ValueError for a closed graph
        self._runtime = runtime
        self._graph = graph
        self._slot_handle: Optional["Runtime"] = None

    def __enter__(self) -> Graph:
        if self._slot_handle is not None:
            raise RuntimeError("this capture is already open; call rt.graph() again")
        rt = self._runtime
        bound = rt.bind_slot(pool.call_slot(rt))
        try:
            _capi.check(_capi.api().tf_graph_capture_begin(bound._ref()))
        except BaseException:
            bound.close()
            raise
        self._slot_handle = bound
        if self._graph is None:
            self._graph = Graph(rt._owner_clone())
        return self._graph

    def __exit__(self, kind: Optional[Type[BaseException]], error: Optional[BaseException],
                 trace: Optional[TracebackType]) -> None:
        bound, self._slot_handle = self._slot_handle, None
        assert bound is not None and self._graph is not None
        try:
            if error is not None:
                self._abort(bound, error)
            else:
                self._end(bound, self._graph)
        finally:
            self._graph._abandon()       # unless it holds a graph now
            bound.close()

    @staticmethod
    def _abort(bound: "Runtime", error: BaseException) -> None:
        """Drop the capture; the block's exception propagates, with a
        failed abort noted on it.  A failed abort leaves the capture open:
        it is tried once more."""
        st = _capi.api().tf_graph_capture_abort(bound._ref())
        if st:
            st = _capi.api().tf_graph_capture_abort(bound._ref())
        if st and sys.version_info >= (3, 11):
            error.add_note(f"tenferro_gpu: aborting the capture failed: {_capi.error(st)}")

    @staticmethod
    def _end(bound: "Runtime", graph: Graph) -> None:
        api = _capi.api()
        if graph._capturing:
            out = ctypes.c_void_p()
            st = api.tf_graph_capture_end(bound._ref(), ctypes.byref(out))
            if st == 0:
                graph._adopt(out.value or 0)
                return
        else:
            updated = ctypes.c_int32()
            st = api.tf_graph_capture_update(bound._ref(), graph._ref(), ctypes.byref(updated))
            if st == 0:
                graph.updated_in_place = bool(updated.value)
                return
        failure: Optional[BaseException] = _capi.error(st)
        # The message says whether the capture is still open; if it is,
        # drop it so that the slot works as before.
        _capi.quietly(api.tf_graph_capture_abort, bound._ref())
        try:
            raise failure        # type: ignore[misc]
        finally:
            failure = None       # no frame -> exception cycle


class GraphMixin:
    """Runtime methods for graph capture."""

    __slots__ = ()

    def graph(self, into: Optional[Graph] = None) -> Capture:
        """A Capture: `with rt.graph() as g:` captures the work queued on
        the slot this call uses into a new Graph; `with rt.graph(g):`
        captures anew into Graph g (its earlier work until the block
        ends).  See Capture."""
        return Capture(self, into)       # type: ignore[arg-type]


__all__ = ["Capture", "Graph", "GraphMixin"]
