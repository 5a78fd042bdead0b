# SPDX-License-Identifier: MIT OR Apache-2.0
"""Stream: one slot bound, whatever OS thread calls; `with stream:` makes it
the current stream of its runtime's calls in this thread or asyncio task.

The driver double runs stream work only when its stream is made to
progress (deferred mode, the default), so a read queued on another slot
than the write it follows sees the old bytes: the migration tests show the
unbound runtime losing the data and the Stream keeping it."""

import asyncio
import concurrent.futures
import gc
import os
import subprocess
import sys

import pytest

import tenferro_gpu as tg
import support

PACKAGE_ROOT = os.path.join(support.REPO, "bindings", "python")

DATA = bytes(range(1, 17))


def _in_thread(fn, *args):
    """fn(*args) on a new OS thread; its result (or exception)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


@pytest.fixture
def rt8():
    with tg.Runtime(0, stream_slots=8) as rt:
        yield rt


def test_a_stream_is_a_bound_slot_and_a_runtime(rt8):
    stream = rt8.bind_stream(3)
    assert isinstance(stream, tg.Runtime) and isinstance(stream, tg.Stream)
    assert stream.slot == stream.current_slot == 3
    assert stream.ptr == stream.stream() == rt8.slot_stream(3)
    assert stream.identity == rt8.identity and stream.runtime.identity == rt8.identity
    assert _in_thread(lambda: (stream.current_slot, stream.stream())) == (3, stream.ptr)
    assert tg.Stream(rt8, 3) == stream and hash(tg.Stream(rt8, 3)) == hash(stream)
    assert "slot=3" in repr(stream)
    stream.close()
    assert stream.closed and repr(stream) == "<tenferro_gpu.Stream (closed)>"
    with pytest.raises(ValueError, match="Stream is closed"):
        stream.sync()


def test_the_default_slot_is_the_one_calls_would_use_here(rt8):
    assert rt8.bind_stream().slot == rt8.current_slot
    assert _in_thread(lambda: (rt8.bind_stream().slot, rt8.current_slot)) in {
        (n, n) for n in range(8)}
    with pytest.raises(tg.InvalidArgumentError):
        rt8.bind_stream(8)


def test_with_stream_makes_it_current_for_the_runtimes_calls(rt8):
    stream = rt8.bind_stream(5)
    own = rt8.current_slot
    assert tg.current_stream(rt8) is None
    with stream as entered:
        assert entered is stream and tg.current_stream(rt8) is stream
        assert rt8.current_slot == 5 and rt8.stream() == stream.ptr
        assert rt8.clone().current_slot == 5            # every unbound handle
        with rt8.alloc(16) as buf:
            assert buf.slot == 5
            buf.upload(DATA)                            # on slot 5 ...
            assert buf.download() == DATA               # ... and read there
    assert rt8.current_slot == own and tg.current_stream(rt8) is None


def test_blocks_nest_and_restore_in_order(rt8):
    a, b = rt8.bind_stream(1), rt8.bind_stream(2)
    with a:
        with b:
            assert rt8.current_slot == 2
        assert rt8.current_slot == 1
        with pytest.raises(RuntimeError, match="out of order"):
            b.__exit__(None, None, None)
    assert tg.current_stream(rt8) is None


def test_bound_handles_and_other_runtimes_ignore_the_current_stream(rt8):
    with tg.Runtime(0, stream_slots=8) as other:
        bound = rt8.bind_slot(6)
        outside = other.current_slot
        with rt8.bind_stream(outside ^ 1):       # a slot other's calls do not use
            assert bound.current_slot == 6       # an explicit slot wins
            assert other.current_slot == outside
            assert tg.current_stream(other) is None
        bound.close()


def test_a_new_thread_starts_without_a_current_stream(rt8):
    stream = rt8.bind_stream(4)
    with stream:
        seen = _in_thread(lambda: (tg.current_stream(rt8), rt8.current_slot))
    assert seen[0] is None


def test_asyncio_tasks_each_have_their_own_current_stream(rt8):
    a, b = rt8.bind_stream(1), rt8.bind_stream(2)

    async def work(stream, started, other_started):
        with stream:
            started.set()
            await other_started.wait()           # the other task is inside its block
            slot = rt8.current_slot
            # asyncio.to_thread carries the task's context to the worker thread
            threaded = await asyncio.to_thread(lambda: rt8.current_slot)
            return slot, threaded

    async def main():
        sa, sb = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(work(a, sa, sb), work(b, sb, sa))
    assert asyncio.run(main()) == [(1, 1), (2, 2)]


def test_buffers_made_on_a_stream_follow_the_current_stream_afterwards(rt8):
    stream = rt8.bind_stream(2)
    buf = stream.alloc(16)
    assert buf.slot == 2
    assert buf.runtime.current_slot == rt8.current_slot  # unbound, like rt8
    with rt8.bind_stream(7):
        assert buf.runtime.current_slot == 7
    buf.free()


def test_double_stream_objects_release_their_references(double):
    rt = tg.Runtime(0)
    stream = rt.bind_stream(0)
    rt.close()
    assert double.primary_refcount(0) == 1              # the stream keeps it
    stream.sync()
    stream.close()
    assert double.primary_refcount(0) == 0
    rt = tg.Runtime(0)
    rt.bind_stream(0)                                    # dropped at once
    gc.collect()
    rt.close()
    assert double.primary_refcount(0) == 0


# ---- work that moves between OS threads mid-sequence ----------------------

def test_double_an_unbound_runtime_loses_work_that_moves_between_threads(double, rt8):
    # The upload is queued on the first thread's slot, the download on the
    # second thread's: nothing orders them, and the download sees old bytes.
    buf = rt8.alloc(16)
    buf.upload(bytes(16))
    rt8.sync()
    slot_a = _in_thread(lambda: (rt8.upload(DATA, buf), rt8.current_slot)[1])
    slot_b, seen = _in_thread(lambda: (rt8.current_slot,
                                       bytes(rt8.download(buf, bytearray(16)))))
    assert slot_a != slot_b
    assert seen == bytes(16), "the download was ordered after the upload after all"
    double.complete_all()
    assert bytes(buf.download()) == DATA                 # it was only out of order
    buf.free()


def test_double_a_stream_keeps_work_that_moves_between_threads_in_order(double, rt8):
    stream = rt8.bind_stream(3)
    buf = stream.alloc(16)
    stream.upload(bytes(16), buf)
    stream.sync()
    slot_a = _in_thread(lambda: (stream.upload(DATA, buf), stream.current_slot)[1])
    slot_b, seen = _in_thread(lambda: (stream.current_slot,
                                       bytes(stream.download(buf, bytearray(16)))))
    assert slot_a == slot_b == 3
    assert seen == DATA
    # The same through the runtime and the buffer inside `with stream:` on
    # each thread, as a thread pool task would do it.
    data2 = DATA[::-1]

    def up():
        with stream:
            buf.upload(data2)

    def down():
        with stream:
            return bytes(buf.download())
    _in_thread(up)
    assert _in_thread(down) == data2
    buf.free()
    stream.close()


def test_double_a_stream_through_asyncio_to_thread(double, rt8):
    stream = rt8.bind_stream(6)
    buf = stream.alloc(16)

    async def main():
        with stream:
            await asyncio.to_thread(buf.upload, DATA)
            return bytes(await asyncio.to_thread(buf.download))
    assert asyncio.run(main()) == DATA
    buf.free()


def test_torch_and_cupy_are_imported_by_the_helpers_only(rt8, monkeypatch):
    code = ("import sys\nimport tenferro_gpu as tg\n"
            "with tg.Runtime(0) as rt:\n"
            "    s = rt.bind_stream()\n"
            "    with s:\n"
            "        rt.sync()\n"
            "print(sorted(m for m in ('torch', 'cupy', 'numpy') if m in sys.modules))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(support.REPO, "bindings", "python"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    monkeypatch.setitem(sys.modules, "torch", None)     # import torch fails
    monkeypatch.setitem(sys.modules, "cupy", None)
    stream = rt8.bind_stream(0)
    with pytest.raises(ImportError):
        stream.torch_stream()
    with pytest.raises(ImportError):
        stream.cupy_stream()


def test_stream_waits_for_another_stream(double, rt8):
    a, b = rt8.bind_stream(1), rt8.bind_stream(2)
    buf = a.alloc(16)
    a.upload(bytes(16), buf)
    a.sync()
    a.upload(DATA, buf)                 # queued on slot 1, not run yet
    b.wait_stream(a)
    assert bytes(b.download(buf, bytearray(16))) == DATA
    with tg.Runtime(0) as other:        # a stream of another runtime: an event
        c = other.bind_stream(0)
        a.upload(DATA[::-1], buf)
        c.wait_stream(a)
        assert bytes(c.download(buf, bytearray(16))) == DATA[::-1]
        c.close()
    buf.free()


def test_support_foreign_library_sees_the_double_lag(double, rt8):
    # The helper the array-protocol tests use: another library's stream is
    # not ordered with a slot.
    foreign = support.ForeignLibrary(rt8)
    s = foreign.new_stream()
    buf = rt8.alloc(16)
    rt8.upload(bytes(16), buf)
    rt8.sync()
    rt8.upload(DATA, buf)
    assert foreign.read(s, buf.ptr, 16) == bytes(16)
    rt8.sync()
    assert foreign.read(s, buf.ptr, 16) == DATA
    foreign.destroy_stream(s)
    buf.free()


def test_objects_released_at_exit_while_still_referenced_refuse_use():
    # At interpreter exit the objects still exist when the binding releases
    # them: each is marked closed first, so a late call (an atexit hook
    # registered before the binding's) raises rather than using a released
    # handle or freed memory.
    code = """if True:
        import atexit, sys
        def late():
            checks = [("view.ptr", "freed", lambda: view.ptr),
                      ("stream.sync()", "Stream is closed", stream.sync),
                      ("rt.stream()", "Runtime is closed", rt.stream)]
            for what, words, call in checks:
                try:
                    call()
                    print(what, "worked")
                except ValueError as e:
                    print(what, "refused" if words in str(e) else e)
            print(rt.closed and stream.closed and buf.freed)
        atexit.register(late)
        import tenferro_gpu as tg
        rt = tg.Runtime(0)
        stream = rt.bind_stream(0)
        buf = rt.alloc(8)
        view = buf[2:]
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=PACKAGE_ROOT))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == [
        "view.ptr refused", "stream.sync() refused", "rt.stream() refused", "True"], done.stdout