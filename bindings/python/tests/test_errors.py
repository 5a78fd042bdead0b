# SPDX-License-Identifier: MIT OR Apache-2.0
"""Statuses become exceptions carrying the record of the failing call, read
on the failing thread right after the call."""

import gc
import os
import pickle
import subprocess
import sys
import textwrap
import threading

import pytest

import tenferro_gpu as tg
from tenferro_gpu import errors
import support


def test_one_exception_class_per_status_under_a_common_base():
    classes = [tg.error_class(s) for s in tg.Status if s != tg.Status.OK]
    assert len(set(classes)) == len(classes) == 17
    for status, cls in zip([s for s in tg.Status if s != tg.Status.OK], classes):
        assert issubclass(cls, tg.TenferroError)
        assert cls is not tg.TenferroError
        assert cls.__name__.endswith("Error")
        assert getattr(tg, cls.__name__) is cls, status
    assert issubclass(tg.InvalidArgumentError, ValueError)
    assert tg.error_class(99) is tg.TenferroError


def test_status_values_and_strings_come_from_the_library():
    assert tg.status_string(tg.Status.OK) == "success"
    for status in tg.Status:
        text = tg.status_string(status)
        assert text and text != "unknown status", status
    assert tg.status_string(1000) == "unknown status"
    assert [s.value for s in tg.Status] == list(range(18))
    assert [d.value for d in tg.CodeDomain] == list(range(6))


def test_a_refusal_by_the_library_has_no_call_and_no_code(rt):
    with pytest.raises(tg.InvalidArgumentError) as caught:
        rt.bind_slot(rt.slot_count)
    e = caught.value
    assert e.status is tg.Status.INVALID_ARGUMENT
    assert e.operation == "tf_runtime_bind_slot"
    assert e.call == ""
    assert e.code == 0 and e.code_domain is tg.CodeDomain.NONE
    assert e.message == f"tf_runtime_bind_slot: slot {rt.slot_count} is outside 0..{rt.slot_count - 1}"
    assert str(e) == e.message


def test_a_driver_failure_carries_operation_call_and_cuda_code(double, rt):
    double.inject("cuStreamCreate", 1, support.CUDA_ERROR_OUT_OF_MEMORY)
    with pytest.raises(tg.OutOfMemoryError) as caught:
        rt.stream()
    e = caught.value
    assert (e.status, e.operation, e.call, e.code, e.code_domain) == (
        tg.Status.OUT_OF_MEMORY, "tf_runtime_stream", "cuStreamCreate",
        support.CUDA_ERROR_OUT_OF_MEMORY, tg.CodeDomain.CUDA)
    assert "cuStreamCreate failed" in e.message
    assert "CUDA_ERROR_OUT_OF_MEMORY (2)" in e.message
    assert rt.stream() != 0           # a failed creation is retried


def test_unavailable_device_lists_the_devices_found():
    with pytest.raises(tg.DeviceUnavailableError) as caught:
        tg.device_info(tg.device_count() + 3)
    assert caught.value.operation == "tf_device_info"
    assert "found" in caught.value.message
    with pytest.raises(tg.DeviceUnavailableError):
        tg.Runtime(tg.device_count())


def test_a_sticky_fault_is_a_device_fault_error(double, rt):
    rt.stream()
    double.poison_context(rt.primary_context, support.CUDA_ERROR_ILLEGAL_ADDRESS)
    with pytest.raises(tg.DeviceFaultError) as caught:
        rt.sync()
    assert caught.value.code == support.CUDA_ERROR_ILLEGAL_ADDRESS
    assert caught.value.call == "cuStreamSynchronize"
    with pytest.raises(tg.DeviceFaultError):
        rt.with_context(lambda: None)
    rt.close()                        # leaks quietly, never raises


def _run_child(code, **env):
    env = dict(os.environ, PYTHONPATH=os.path.join(support.REPO, "bindings", "python"),
               **env)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")


def test_no_device_in_a_fresh_process(double):
    out = _run_child("""
        import ctypes
        ctypes.CDLL("libcuda.so.1").tfd_set_devices(0)
        import tenferro_gpu as tg
        print(tg.gpu_available(), tg.device_count())
        try:
            tg.Runtime(0)
        except tg.NoDeviceError as e:
            print(e.operation, e.call, e.code, e.code_domain.name)
    """)
    assert out[:2] == ["False 0", "tf_runtime_new cuInit 100 CUDA"]


def test_missing_driver_is_driver_not_found_in_a_fresh_process():
    out = _run_child("""
        import tenferro_gpu as tg
        print(tg.gpu_available())
        try:
            tg.device_count()
        except tg.DriverNotFoundError as e:
            print(e.operation, e.call, e.code_domain.name)
    """, TENFERRO_GPU_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    assert out[:2] == ["False", "tf_device_count dlopen NONE"]


def test_each_thread_raises_its_own_record():
    rt = tg.Runtime(0, stream_slots=2)
    start = threading.Barrier(4)
    seen = [[] for _ in range(4)]

    def fail_repeatedly(index):
        start.wait()
        for i in range(200):
            bad = 10 + index * 1000 + i
            try:
                if index % 2:
                    rt.slot_stream(bad)
                else:
                    tg.device_info(-bad)
            except tg.InvalidArgumentError as e:
                seen[index].append((bad, e.operation, e.message))
    threads = [threading.Thread(target=fail_repeatedly, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rt.close()
    for index, records in enumerate(seen):
        assert len(records) == 200
        for bad, op, message in records:
            if index % 2:
                assert op == "tf_runtime_slot_stream"
                assert f"slot {bad} is outside" in message
            else:
                assert op == "tf_device_info"
                assert str(-bad) in message


def test_last_error_mirrors_the_raised_exception_until_cleared(rt):
    assert tg.last_error() is None
    with pytest.raises(tg.InvalidArgumentError) as caught:
        rt.slot_stream(-1)
    again = tg.last_error()
    assert type(again) is tg.InvalidArgumentError
    assert again.message == caught.value.message
    rt.sync()                          # success leaves the record alone
    assert tg.last_error().message == caught.value.message
    tg.clear_last_error()
    assert tg.last_error() is None


def test_exceptions_pickle_with_their_record(rt):
    with pytest.raises(tg.InvalidArgumentError) as caught:
        rt.slot_stream(-1)
    back = pickle.loads(pickle.dumps(caught.value))
    assert type(back) is tg.InvalidArgumentError
    assert repr(back) == repr(caught.value)


def test_a_status_newer_than_the_binding_keeps_its_number():
    info = type("Info", (), dict(status=42, operation=b"tf_x", call=b"", code=0,
                                 code_domain=9, message=b"tf_x: new"))()
    e = errors.error_from_info(42, info)
    assert type(e) is tg.TenferroError
    assert e.status == 42 and e.code_domain == 9
    assert "status=42" in repr(e)


# ---- the record is the failing call's own, whatever cleanup runs before it
# is read (NOTE one call's record in tenferro_gpu/_capi.py) -------------------

def _collect_garbage_after(entry):
    """A trace function that runs a garbage collection at the first line
    the binding executes after the driver's `entry` was called: the worst
    moment for a finalizer that calls the library."""
    before = support.DOUBLE.call_count(entry)
    state = {"collected": False}

    def local(frame, event, arg):
        if (event == "line" and not state["collected"]
                and support.DOUBLE.call_count(entry) > before):
            state["collected"] = True
            gc.collect()
        return local

    def tracer(frame, event, arg):
        return local if "tenferro_gpu" in frame.f_code.co_filename else None
    return tracer, state


def _garbage_whose_free_fails(rt):
    """A buffer only a reference cycle holds, whose tf_free will fail."""
    class Cycle:
        pass
    cycle = Cycle()
    cycle.me, cycle.buf = cycle, rt.alloc(64)
    support.DOUBLE.inject("cuMemFreeAsync", 1, support.CUDA_ERROR_UNKNOWN)
    support.DOUBLE.inject("cuMemFree", 1, support.CUDA_ERROR_UNKNOWN)


@pytest.mark.parametrize("call", ["sync", "download"])
def test_a_finalizer_failing_before_the_read_leaves_the_callers_record(double, rt, call):
    src = rt.alloc(16)
    rt.sync()
    gc.disable()
    try:
        _garbage_whose_free_fails(rt)
        double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
        tracer, state = _collect_garbage_after("cuStreamSynchronize")
        out = bytearray(16)
        sys.settrace(tracer)
        try:
            with pytest.raises(tg.CudaError) as caught:
                rt.sync() if call == "sync" else rt.download(src, out)
        finally:
            sys.settrace(None)
    finally:
        gc.enable()
    assert state["collected"]
    assert double.call_count("cuMemFreeAsync") + double.call_count("cuMemFree") >= 1
    expected = "tf_runtime_sync" if call == "sync" else "tf_download"
    assert (caught.value.operation, caught.value.call) == (expected, "cuStreamSynchronize")
    assert tg.last_error().operation == expected     # last_error() agrees


def test_a_finalizer_that_fails_on_its_own_leaves_the_record_alone(double, rt):
    with pytest.raises(tg.InvalidArgumentError) as caught:
        rt.slot_stream(-1)
    gc.disable()
    try:
        _garbage_whose_free_fails(rt)
    finally:
        gc.enable()
    gc.collect()                                       # its tf_free fails
    assert tg.last_error().message == caught.value.message
    with pytest.raises(tg.InvalidArgumentError) as again:
        rt.slot_stream(-2)                             # a later failure is its own
    assert "-2" in again.value.message


# ---- exception classes -----------------------------------------------------

def test_out_of_memory_is_a_memory_error(double, rt):
    assert issubclass(tg.OutOfMemoryError, MemoryError)
    assert issubclass(tg.OutOfMemoryError, tg.TenferroError)
    # tf_alloc draws from the runtime's pool and retries once after a trim
    double.inject("cuMemAllocFromPoolAsync", 1, support.CUDA_ERROR_OUT_OF_MEMORY, 2)
    with pytest.raises(MemoryError) as caught:
        rt.alloc(1 << 20)
    assert type(caught.value) is tg.OutOfMemoryError
    assert (caught.value.operation, caught.value.call) == ("tf_alloc", "cuMemAllocFromPoolAsync")
    assert caught.value.code == support.CUDA_ERROR_OUT_OF_MEMORY
    assert "tried once more" in caught.value.message


def _every_error_class():
    classes = {tg.TenferroError, tg.LoadError, tg.MissingFunctionError}
    classes.update(tg.error_class(s) for s in tg.Status if s != tg.Status.OK)
    return sorted(classes, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _every_error_class(), ids=lambda c: c.__name__)
def test_every_exception_class_pickles_with_every_field(cls):
    if issubclass(cls, tg.TenferroError):
        status = next((s for s in tg.Status if tg.error_class(s) is cls), 42)
        e = cls(int(status), "tf_op", "cuCall", 700, int(tg.CodeDomain.CUDA), "tf_op: it failed")
        e.log = "line 1\nline 2"            # CompileError's; any field set later
        e.note = {"kept": True}
    else:
        e = cls("libtenferro_gpu.so.1 could not be loaded")
        e.note = {"kept": True}
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls
    assert back.args == e.args and str(back) == str(e)
    assert vars(back) == vars(e)
    if issubclass(cls, tg.TenferroError):
        assert (back.status, back.operation, back.call, back.code, back.code_domain,
                back.message) == (e.status, e.operation, e.call, e.code, e.code_domain,
                                  e.message)


def test_a_compile_error_keeps_its_log_through_pickle(rt):
    with pytest.raises(tg.CompileError) as caught:
        rt.compile("#error the double refuses this\nint x;\n")
    assert caught.value.log
    back = pickle.loads(pickle.dumps(caught.value))
    assert back.log == caught.value.log
