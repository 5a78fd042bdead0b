# SPDX-License-Identifier: MIT OR Apache-2.0
"""Work on the slot streams: cublas_enqueue and stream_enqueue with Python
callables, the library's cuBLAS symbols, slot_wait, events, retirement."""

import gc
import sys
import threading

import pytest

import tenferro_gpu as tg
import support


def test_cublas_enqueue_gives_the_slots_handle_and_stream(rt, raw):
    before = raw.current()
    seen = []

    def fn(handle, stream, tag, *, more):
        seen.append((handle, stream, tag, more, raw.current()))
    rt.cublas_enqueue(fn, "t", more=1)
    rt.cublas_enqueue(fn, "u", more=2, pointer_mode=tg.PointerMode.DEVICE)
    (h1, s1, *rest1), (h2, s2, *rest2) = seen
    assert h1 == h2 and h1 and s1 == s2 == rt.stream()
    assert rest1 == ["t", 1, rt.primary_context] and rest2[:2] == ["u", 2]
    assert raw.current() == before
    if support.DOUBLE is not None:
        assert support.DOUBLE.cublas_stream(h1) == s1


def test_cublas_status_and_exceptions(rt):
    with pytest.raises(tg.ProviderError) as e:
        rt.cublas_enqueue(lambda h, s: 7)                   # CUBLAS_STATUS_INVALID_VALUE
    assert (e.value.operation, e.value.code, e.value.code_domain) == (
        "tf_cublas_enqueue", 7, tg.CodeDomain.CUBLAS)
    assert "CUBLAS_STATUS_INVALID_VALUE" in e.value.message

    class Mine(Exception):
        pass

    def boom(h, s):
        raise Mine("from the callable")
    with pytest.raises(Mine, match="from the callable"):
        rt.cublas_enqueue(boom)
    with pytest.raises(TypeError, match="cublasStatus_t"):
        rt.cublas_enqueue(lambda h, s: "ok")
    with pytest.raises(TypeError, match="callable"):
        rt.cublas_enqueue(42)
    with pytest.raises(tg.InvalidArgumentError, match="pointer"):
        rt.cublas_enqueue(lambda h, s: 0, pointer_mode=5)
    rt.cublas_enqueue(lambda h, s: 0)                       # still usable


def test_the_slot_lock_refuses_reentry_instead_of_deadlocking(rt):
    def inner(h, s):
        rt.stream_enqueue(lambda stream: None)
    with pytest.raises(tg.RuntimeStateError) as e:
        rt.cublas_enqueue(inner)
    assert e.value.operation == "tf_stream_enqueue"
    # a call that takes no slot lock works from inside
    rt.cublas_enqueue(lambda h, s: rt.slot_wait(0))


def test_stream_enqueue_returns_the_callables_result(rt, raw):
    assert rt.stream_enqueue(lambda s, k: (s, k, raw.current()), 3) == (
        rt.stream(), 3, rt.primary_context)
    with pytest.raises(KeyboardInterrupt):
        rt.stream_enqueue(lambda s: (_ for _ in ()).throw(KeyboardInterrupt()))


def test_cublas_symbols_come_from_the_librarys_cublas():
    address = tg.cublas_symbol("cublasSgemm_v2")
    assert address and address == tg.cublas_symbol("cublasSgemm_v2")
    assert tg.cublas_version() >= (12, 0, 0)
    with pytest.raises(tg.InvalidArgumentError):
        tg.cublas_symbol("cuMemAlloc")
    with pytest.raises(tg.NotSupportedError) as e:
        tg.cublas_symbol("cublasNoSuchFunction")
    assert e.value.operation == "tf_cublas_symbol"


def test_slot_wait_checks_the_slot():
    with tg.Runtime(0, stream_slots=2) as rt:
        one = rt.bind_slot(1)
        one.stream()
        rt.slot_wait(1)
        with pytest.raises(tg.InvalidArgumentError):
            rt.slot_wait(2)
        one.close()


def test_events_order_slots_and_the_host():
    with tg.Runtime(0, stream_slots=2) as rt, rt.bind_slot(0) as a, rt.bind_slot(1) as b:
        with a.event() as ev:
            assert ev.query()                   # never recorded: done
            ev.record()                         # on the event's runtime: slot 0
            b.wait_event(ev)
            ev.record(b)
            a.record_event(ev)
            ev.synchronize()
            assert ev.query()
            twin = ev.clone()
            ev.close()
            twin.wait(b)
            twin.close()
        with pytest.raises(ValueError, match="closed"):
            ev.record()


def test_double_events_and_their_runtime_live_until_their_last_reference(double):
    events = double.live(support.TFD_EVENTS)
    rt = tg.Runtime(0)
    ev = rt.event()
    twin = ev.clone()
    rt.close()
    assert double.primary_refcount(0) == 1
    double.set_async_pending(1)
    twin.record()
    assert not ev.query()
    ev.synchronize()
    assert ev.query()
    ev.close()
    assert double.live(support.TFD_EVENTS) >= events + 1
    del twin
    gc.collect()
    assert double.primary_refcount(0) == 0


def test_retire_runs_the_release_once_after_the_device_passed(double, rt):
    ran = []
    rt.stream()
    double.set_async_pending(1)
    rt.retire(ran.append, "released")
    rt.poll_retirements()
    assert ran == [] and tg._callbacks.pending_releases() >= 1
    rt.sync()
    assert ran == ["released"]
    rt.sync()
    assert ran == ["released"]
    stats = rt.retirement_stats()
    assert stats.capacity == 1024 and stats.released == stats.deferred >= 1


def test_keep_until_done_holds_references(rt):
    class Held:
        pass
    obj = Held()
    import weakref
    ref = weakref.ref(obj)
    rt.keep_until_done(obj)
    del obj
    rt.sync()
    gc.collect()
    assert ref() is None


def test_an_exception_in_a_release_goes_to_unraisablehook(rt, monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)

    def release():
        raise RuntimeError("in release")
    rt.retire(release)
    rt.sync()
    assert len(seen) == 1 and isinstance(seen[0].exc_value, RuntimeError)
    with pytest.raises(TypeError, match="callable"):
        rt.retire(None)


def test_double_a_refused_retirement_drops_the_release(double, rt):
    rt.stream()
    rt.close()
    with pytest.raises(ValueError, match="closed"):
        rt.retire(print)
    with tg.Runtime(0) as other:
        other.stream()
        double.poison_context(double.primary_context(0), support.CUDA_ERROR_ILLEGAL_ADDRESS)
        pending = tg._callbacks.pending_releases()
        with pytest.raises(tg.DeviceFaultError):
            other.retire(print)
        assert tg._callbacks.pending_releases() == pending
        double.poison_context(double.primary_context(0), 0)


def test_threads_enqueue_on_their_own_slots(rt):
    streams, failures = [], []

    def work():
        try:
            got = []
            rt.cublas_enqueue(lambda h, s: got.append(s))
            streams.append((got[0], rt.stream()))
        except BaseException as e:
            failures.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert all(a == b for a, b in streams) and len({a for a, _ in streams}) == 4
