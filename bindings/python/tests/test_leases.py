# SPDX-License-Identifier: MIT OR Apache-2.0
"""The runtime reference the allocations of one Runtime object share
(tenferro_gpu/_leases.py): the runtime stays while any of their memory is
unfreed and goes right after the last free, whichever way its Runtime
went."""

import gc
import os
import subprocess
import sys
import textwrap
import threading

import pytest

import tenferro_gpu as tg
import support

pytestmark = pytest.mark.skipif(support.DOUBLE is None, reason="needs the driver double")


def test_buffers_of_one_runtime_share_one_reference(double):
    with tg.Runtime(0) as rt:
        a, b = rt.alloc(16), rt.alloc(16)
        assert a.runtime is b.runtime and a.runtime is not rt
        assert not a.runtime.closed
        a.free()
        b.free()
        assert not a.runtime.closed      # rt is open: kept for its next buffer
        assert rt.alloc(8).runtime is a.runtime
    assert double.primary_refcount(0) == 0


def test_the_runtime_goes_with_the_last_of_several_frees(double):
    rt = tg.Runtime(0)
    bufs = [rt.alloc(16) for _ in range(3)]
    rt.close()
    for buf in bufs[:-1]:
        buf.free()
        assert double.primary_refcount(0) == 1
    bufs[-1].free()
    assert double.primary_refcount(0) == 0
    assert bufs[0].runtime.closed        # a freed buffer holds a closed owner
    with pytest.raises(ValueError, match="closed"):
        bufs[0].runtime.alloc(8)


def test_a_freed_buffer_does_not_keep_a_runtime_closed_later(double):
    rt = tg.Runtime(0)
    freed = rt.alloc(16)
    freed.free()
    rt.close()
    assert double.primary_refcount(0) == 0
    assert freed.runtime.closed


def test_a_runtime_dropped_unclosed_goes_with_its_last_free(double):
    rt = tg.Runtime(0)
    live, freed = rt.alloc(16), rt.alloc(16)
    freed.free()
    del rt
    gc.collect()
    assert double.primary_refcount(0) == 1
    del live
    gc.collect()
    assert double.primary_refcount(0) == 0
    assert freed.runtime.closed


def test_a_runtime_dropped_unclosed_with_only_freed_buffers_goes(double):
    rt = tg.Runtime(0)
    freed = rt.alloc(16)
    freed.free()
    del rt
    gc.collect()
    assert double.primary_refcount(0) == 0
    assert freed.runtime.closed


def test_a_closed_owner_is_replaced_at_the_next_buffer(double):
    with tg.Runtime(0) as rt:
        a = rt.alloc(16)
        a.runtime.close()                  # borrowed, but closing it is not fatal
        b = rt.alloc(16)
        assert b.runtime is not a.runtime and not b.runtime.closed
        a.free()                           # through another of the binding's references
        b.free()
    assert double.primary_refcount(0) == 0


def test_a_failed_allocation_gives_its_lease_back(double):
    rt = tg.Runtime(0)
    double.inject("cuMemAllocFromPoolAsync", 1, 2, times=2)
    double.inject("cuMemAlloc_v2", 1, 2, times=2)
    with pytest.raises(tg.OutOfMemoryError):
        rt.alloc(16)
    rt.close()
    assert double.primary_refcount(0) == 0


def test_buffers_made_on_many_threads_share_the_count(double):
    rt = tg.Runtime(0, stream_slots=4)
    bufs = []

    def work():
        for _ in range(50):
            bufs.append(rt.alloc(8))
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rt.close()
    assert double.primary_refcount(0) == 1
    while bufs:
        bufs.pop().free()
    assert double.primary_refcount(0) == 0


def test_a_stream_shares_its_own_reference(double):
    rt = tg.Runtime(0, stream_slots=2)
    stream = rt.bind_stream(1)
    buf = stream.alloc(16)
    assert buf.slot == 1 and buf.runtime is not rt.alloc(8).runtime
    stream.close()
    rt.close()
    gc.collect()
    assert double.primary_refcount(0) == 1
    buf.free()
    assert double.primary_refcount(0) == 0


def test_memory_still_owned_at_exit_is_freed_before_the_runtime_goes():
    code = textwrap.dedent(f"""
        import atexit, ctypes
        double = ctypes.CDLL("libcuda.so.1")
        double.tfd_calls.restype = ctypes.c_ulong
        def check():     # registered first: runs after the binding's exit hook
            print(double.tfd_live({support.TFD_DEVICE_ALLOCS}), double.tfd_primary_refcount(0),
                  double.tfd_calls(b"cuMemFreeAsync"))
        atexit.register(check)
        import tenferro_gpu as tg
        rt = tg.Runtime(0)
        kept = [rt.alloc(64) for _ in range(3)]
        view = kept[0][8:]
        rt.alloc(64).free()
        other = tg.Runtime(0).empty(4)      # its Runtime is never closed either
        rt.sync()                           # runs the queued free
        print(double.tfd_live({support.TFD_DEVICE_ALLOCS}))
    """)
    env = dict(os.environ, PYTHONPATH=os.path.join(support.REPO, "bindings", "python"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    during, after = done.stdout.split("\n")[:2]
    assert int(during) == 4
    # Each freed through tf_free (the stream-ordered free), not by the
    # teardown: one free() and four at exit.
    assert after.split() == ["0", "0", "5"]
