# SPDX-License-Identifier: MIT OR Apache-2.0
"""Graph capture (tenferro_gpu/graph.py): `with rt.graph() as g:`, launch,
re-capture into a graph, release, an exception that aborts the capture,
and the calls the library refuses while a slot captures.  The driver double
models capture as the driver has it (tests/cuda_double/graph.h): captured
work runs only at a launch."""

import gc
import sys
import threading

import pytest

import tenferro_gpu as tg
import support

N = 256


def _buffers(rt, *fills):
    out = []
    for fill in fills:
        buf = rt.alloc(N)
        buf.upload(bytes([fill]) * N)
        out.append(buf)
    rt.sync()
    return out


def _read(rt, buf):
    return bytes(rt.download(buf, bytearray(N)))


def test_captured_work_runs_at_each_launch_only(rt):
    x, y = _buffers(rt, 1, 0)
    with rt.graph() as g:
        rt.copy(x, y)
        with pytest.raises(ValueError, match="still being captured"):
            g.launch()
    assert isinstance(g, tg.Graph) and not g.closed and g.handle
    assert _read(rt, y) == bytes(N)                 # captured, not run
    g.launch()
    assert _read(rt, y) == b"\x01" * N
    x.upload(b"\x07" * N)
    g.launch()                                      # the same copy, again
    assert _read(rt, y) == b"\x07" * N
    g.close()
    g.close()                                       # idempotent
    with pytest.raises(ValueError, match="closed"):
        g.launch()
    x.free()
    y.free()


def test_refused_calls_raise_the_librarys_error_and_the_capture_stays(rt):
    x, y = _buffers(rt, 2, 0)
    host = bytearray(N)
    with rt.graph() as g:
        rt.copy(x, y)
        refused = [
            ("tf_runtime_sync", rt.sync),
            ("tf_download", lambda: rt.download(x, host)),
            ("tf_download_scalar", lambda: rt.download_scalar(x, "f")),
            ("tf_upload", lambda: rt.upload(b"\x05" * 16, y)),
        ]
        for operation, call in refused:
            with pytest.raises(tg.RuntimeStateError) as e:
                call()
            assert e.value.operation == operation, e.value
            assert "is capturing a graph" in e.value.message, e.value
    g.launch()
    assert _read(rt, y) == b"\x02" * N              # what was captured runs
    g.close()
    x.free()
    y.free()


def test_a_temporary_allocated_and_freed_inside_is_the_graphs(rt):
    x, y = _buffers(rt, 6, 0)
    with rt.graph() as g:
        tmp = rt.alloc(N)                           # an allocation node
        rt.copy(x, tmp)
        rt.copy(tmp, y)
        tmp.free()                                  # its free node
    assert _read(rt, y) == bytes(N)                 # captured, not run
    g.launch()
    assert _read(rt, y) == b"\x06" * N
    x.upload(b"\x08" * N)
    g.launch()                                      # allocated and freed again
    assert _read(rt, y) == b"\x08" * N
    g.close()
    x.free()
    y.free()


def test_a_temporary_left_unfreed_refuses_the_end(rt):
    with pytest.raises(tg.RuntimeStateError) as e:
        with rt.graph():
            kept = rt.alloc(64)
    assert e.value.operation == "tf_graph_capture_end", e.value
    assert "not freed in it" in e.value.message, e.value
    del kept
    gc.collect()
    x, y = _buffers(rt, 4, 0)                       # the slot works as before
    rt.copy(x, y)
    assert _read(rt, y) == b"\x04" * N
    x.free()
    y.free()


def test_an_exception_aborts_the_capture_and_propagates(double, rt):
    x, y = _buffers(rt, 3, 0)
    aborts = double.call_count("cuStreamEndCapture")
    with pytest.raises(KeyError, match="inside"):
        with rt.graph() as g:
            rt.copy(x, y)
            raise KeyError("inside")
    assert double.call_count("cuStreamEndCapture") == aborts + 1
    assert g.closed and double.live(support.TFD_GRAPH_EXECS) == 0
    rt.sync()                                       # the slot works as before
    assert _read(rt, y) == bytes(N)                 # the aborted copy never ran
    with rt.graph() as again:                       # and may capture again
        rt.copy(x, y)
    again.launch()
    assert _read(rt, y) == b"\x03" * N
    again.close()
    x.free()
    y.free()


def test_recapture_updates_in_place_or_instantiates_anew(rt):
    x, z, y = _buffers(rt, 4, 9, 0)
    with rt.graph() as g:
        rt.copy(x, y)
    assert g.updated_in_place is None
    with rt.graph(g) as same:
        rt.copy(z, y)                               # same shape, other address
    assert same is g and g.updated_in_place is True
    g.launch()
    assert _read(rt, y) == b"\x09" * N
    with rt.graph(g):
        rt.copy(x, y)
        rt.copy(x, z)                               # another shape
    assert g.updated_in_place is False
    g.launch()
    assert _read(rt, y) == _read(rt, z) == b"\x04" * N
    with pytest.raises(KeyError):
        with rt.graph(g):
            rt.copy(y, x)
            raise KeyError("dropped")
    z.upload(b"\x06" * N)
    g.launch()                                      # still its earlier capture
    assert _read(rt, y) == b"\x04" * N and _read(rt, z) == b"\x04" * N
    g.close()
    with pytest.raises(ValueError, match="closed"):
        rt.graph(g)
    for buf in (x, y, z):
        buf.free()


def test_a_graph_keeps_its_runtime_and_is_released_by_close_or_collection(double):
    rt = tg.Runtime(0)
    with rt.graph() as g:
        pass                                        # an empty graph
    other = g.clone()
    rt.close()
    assert double.primary_refcount(0) == 1          # the graph holds the runtime
    g.launch()
    with g:
        pass                                        # `with` closes it
    assert g.closed and not other.closed
    assert double.live(support.TFD_GRAPH_EXECS) == 1
    del other
    gc.collect()
    assert double.live(support.TFD_GRAPH_EXECS) == 0
    assert double.primary_refcount(0) == 0


def test_a_stream_captures_its_slot_and_may_end_on_another_thread(double, rt):
    x, y = _buffers(rt, 5, 0)
    stream = rt.bind_stream(1)
    capture = stream.graph()
    g = capture.__enter__()
    stream.copy(x, y)
    assert double.capture_nodes(stream.ptr) == 1
    rt.sync()                                       # another slot: not refused
    ended = []
    thread = threading.Thread(target=lambda: ended.append(capture.__exit__(None, None, None)))
    thread.start()
    thread.join()
    assert ended == [None] and not g.closed
    g.launch(rt)                                    # on this thread's slot
    assert _read(rt, y) == b"\x05" * N
    g.close()
    stream.close()
    x.free()
    y.free()


def test_failed_begin_and_end_raise_and_leave_the_slot_working(double, rt):
    x, y = _buffers(rt, 6, 0)
    double.inject("cuStreamBeginCapture", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError) as e:
        with rt.graph():
            pytest.fail("the block runs only after a capture began")
    assert (e.value.operation, e.value.call) == ("tf_graph_capture_begin", "cuStreamBeginCapture")
    double.inject("cuGraphInstantiateWithFlags", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError) as e:
        with rt.graph() as g:
            rt.copy(x, y)
    assert e.value.operation == "tf_graph_capture_end"
    assert g.closed
    rt.sync()                                       # no capture left open
    assert _read(rt, y) == bytes(N)
    x.free()
    y.free()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are 3.11's")
def test_a_failed_abort_is_retried_and_noted(double, rt):
    double.inject("cuStreamEndCapture", 1, support.CUDA_ERROR_UNKNOWN, 2)
    with pytest.raises(KeyError) as e:
        with rt.graph():
            raise KeyError("inside")
    assert any("aborting the capture failed" in note for note in e.value.__notes__)
    # Both attempts failed: the capture is still open, and says so.
    with pytest.raises(tg.RuntimeStateError, match="capturing"):
        rt.sync()
    assert _capi_abort(rt) == 0
    rt.sync()


def _capi_abort(rt):
    return tg._capi.api().tf_graph_capture_abort(rt._active())


def test_an_upload_refused_inside_a_capture_keeps_no_host_memory(rt):
    """tf_upload refused with RUNTIME_STATE queued nothing: the binding
    neither keeps a pageable source exported nor holds a page-locked
    block, which goes back to the pool at close()."""
    x, y = _buffers(rt, 2, 0)
    pageable = bytearray(b"\x05" * N)
    block = rt.host_alloc(N)
    in_use = rt.host_stats().blocks_in_use
    with rt.graph() as g:
        rt.copy(x, y)
        for src in (pageable, block):
            with pytest.raises(tg.RuntimeStateError, match="is capturing a graph"):
                rt.upload(src, y)
    pageable.extend(b"\x06")                # no export left: resizable
    block.close()
    del block, src   # without counted views (ctypes before 3.12), the end of the object
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use - 1
    g.launch()
    assert _read(rt, y) == b"\x02" * N
    g.close()
    x.free()
    y.free()
