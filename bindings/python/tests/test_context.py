# SPDX-License-Identifier: MIT OR Apache-2.0
"""with_context: Python callables run with the primary context current; the
caller's context comes back; exceptions are re-raised, never lost."""

import sys
import threading
import traceback
import weakref

import pytest

import tenferro_gpu as tg
from tenferro_gpu import _callbacks
import support


def test_runs_the_callable_in_the_primary_context_and_restores_none(rt, raw):
    raw.set_current(None)
    inside = rt.with_context(raw.current)
    assert inside == rt.primary_context
    assert raw.current() is None


def test_restores_another_context(rt, raw):
    other = raw.create_context()
    try:
        raw.set_current(other)
        assert rt.with_context(raw.current) == rt.primary_context
        assert raw.current() == other
    finally:
        raw.set_current(None)
        raw.destroy_context(other)


def test_returns_the_result_and_passes_arguments(rt):
    def f(a, b, *, fn, rt):
        return (a, b, fn, rt)
    # fn and rt as keyword names reach the callable, not with_context
    assert rt.with_context(f, 1, 2, fn="x", rt="y") == (1, 2, "x", "y")
    assert rt.with_context(lambda: None) is None


def test_an_exception_is_re_raised_with_its_traceback(rt, raw):
    class Boom(Exception):
        pass
    raised = Boom("inside")

    def fails():
        raise raised
    other = raw.create_context()
    raw.set_current(other)
    try:
        with pytest.raises(Boom) as caught:
            rt.with_context(fails)
        assert caught.value is raised
        frames = [f.name for f in traceback.extract_tb(caught.value.__traceback__)]
        assert "fails" in frames
        assert raw.current() == other
    finally:
        raw.set_current(None)
        raw.destroy_context(other)
    # The library saw the callback fail with the binding's code.
    seen = tg.last_error()
    assert type(seen) is tg.CallbackError
    assert (seen.operation, seen.call, seen.code, seen.code_domain) == (
        "tf_with_context", "callback", _callbacks.CALLBACK_RAISED, tg.CodeDomain.CALLBACK)


class _Callable:
    def __init__(self, fails):
        self.fails = fails

    def __call__(self):
        if self.fails:
            raise ValueError("inside")
        return 1


@pytest.mark.parametrize("fails", [False, True])
def test_nothing_of_the_call_is_kept_afterwards(rt, fails):
    # The frame passed as user_data goes with the call: neither the callable
    # nor its exception outlives it (no reference cycle, no registry).
    fn = _Callable(fails)
    alive = weakref.ref(fn)
    if fails:
        with pytest.raises(ValueError) as caught:
            rt.with_context(fn)
        del caught
    else:
        assert rt.with_context(fn) == 1
    del fn
    assert alive() is None


def test_base_exceptions_are_not_lost_either(rt):
    with pytest.raises(KeyboardInterrupt):
        rt.with_context(lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(SystemExit):
        rt.with_context(sys.exit, 3)


def test_nested_calls_restore_each_level_and_propagate(raw):
    with tg.Runtime(0) as outer, tg.Runtime(0) as inner:
        raw.set_current(None)
        seen = outer.with_context(
            lambda: (inner.with_context(raw.current), raw.current()))
        assert seen == (outer.primary_context, outer.primary_context)
        assert raw.current() is None

        def inner_fails():
            return inner.with_context(lambda: [][1])
        with pytest.raises(IndexError):
            outer.with_context(inner_fails)
        assert raw.current() is None


def test_the_callable_may_use_the_runtime(rt):
    def work():
        s = rt.stream()
        rt.sync()
        return s
    assert rt.with_context(work) == rt.stream()


def test_a_non_callable_is_refused_before_the_call(rt):
    with pytest.raises(TypeError, match="expected a callable"):
        rt.with_context(42)


def test_a_failure_before_the_callable_raises_and_skips_it(double, rt, raw):
    called = []
    double.inject("cuCtxGetCurrent", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError) as caught:
        rt.with_context(called.append, 1)
    assert caught.value.call == "cuCtxGetCurrent"
    assert called == []
    assert raw.current() is None


def test_exactly_three_driver_calls_from_no_context(double, rt):
    double.log_clear()
    rt.with_context(lambda: None)
    assert double.call_log() == "cuCtxGetCurrent,cuCtxSetCurrent,cuCtxSetCurrent"


def test_threads_call_concurrently(rt, raw):
    errors = []
    start = threading.Barrier(8)

    def hammer(i):
        start.wait()
        for n in range(300):
            try:
                if n % 7 == 0:
                    rt.with_context(lambda: 1 / 0)
                else:
                    assert rt.with_context(raw.current) == rt.primary_context
                    assert rt.with_context(lambda x: x * 2, n) == 2 * n
            except ZeroDivisionError:
                pass
            except BaseException as e:       # report, do not hang the join
                errors.append(e)
                return
    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
