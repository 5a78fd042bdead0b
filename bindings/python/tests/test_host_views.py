# SPDX-License-Identifier: MIT OR Apache-2.0
"""Views of a HostBuffer (memoryview, numpy.frombuffer) outlive close():
the block goes back to the pool only once the last view is released, so a
view never aliases the next block nor reads unmapped memory after
host_trim() ("NOTE memory is freed once" in tenferro_gpu/_claims.py).

Exports are counted by the C extension, or by PEP 688 on CPython 3.12 and
later; without either (ctypes alone before 3.12) close() leaves the block
to the HostBuffer object's end, since every view holds it."""

import ctypes
import gc
import os
import subprocess
import sys

import pytest

import tenferro_gpu as tg
import support

try:
    import numpy as np
except ImportError:         # the tests use memoryviews alone then
    np = None
COUNTED = tg.speedups_enabled() or sys.version_info >= (3, 12)
PACKAGE_ROOT = os.path.join(support.REPO, "bindings", "python")


def test_a_view_keeps_the_block_after_close(rt):
    in_use = rt.host_stats().blocks_in_use
    host = rt.host_alloc(4096)
    view = memoryview(host).cast("B")
    array = np.frombuffer(host, np.uint8) if np is not None else memoryview(host).cast("B")
    view[0] = 0x5a
    host.close()
    assert host.closed
    with pytest.raises(ValueError, match="closed"):
        host.ptr
    with pytest.raises(ValueError, match="closed"):
        host[0]
    assert rt.host_stats().blocks_in_use == in_use + 1      # still the views'
    fresh = rt.host_alloc(4096)
    assert fresh.ptr != ctypes.addressof(ctypes.c_char.from_buffer(view))  # not handed out again
    fresh[0] = 0x11
    assert view[0] == 0x5a and array[0] == 0x5a              # no aliasing
    array[1] = 7                                              # still writable memory
    fresh.close()
    del fresh, host                  # without counting, the objects' end counts
    gc.collect()
    del view
    assert rt.host_stats().blocks_in_use == in_use + 1      # the array is a view too
    del array
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use


@pytest.mark.skipif(not COUNTED, reason="needs counted exports (extension or CPython 3.12)")
def test_without_views_close_gives_the_block_back_at_once(rt):
    host = rt.host_alloc(4096)
    address = host.ptr
    memoryview(host).release()
    view = memoryview(host)
    view.release()                                           # released before close
    in_use = rt.host_stats().blocks_in_use
    host.close()
    assert rt.host_stats().blocks_in_use == in_use - 1
    with rt.host_alloc(4096) as again:
        assert again.ptr == address                          # reused: nothing refers to it
    with pytest.raises(BufferError, match="closed"):
        memoryview(host)                                     # no new view after close


@pytest.mark.skipif(not COUNTED, reason="needs counted exports (extension or CPython 3.12)")
def test_the_last_view_released_gives_the_block_back(rt):
    host = rt.host_alloc(8192)
    views = [memoryview(host), memoryview(host)]
    in_use = rt.host_stats().blocks_in_use
    host.close()
    views.pop().release()
    assert rt.host_stats().blocks_in_use == in_use
    views.pop().release()
    assert rt.host_stats().blocks_in_use == in_use - 1


@pytest.mark.skipif(COUNTED, reason="exports are counted here")
def test_uncounted_views_leave_the_block_to_the_objects_end(rt):
    host = rt.host_alloc(4096)
    view = memoryview(host)
    in_use = rt.host_stats().blocks_in_use
    host.close()
    assert rt.host_stats().blocks_in_use == in_use
    del host
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use           # the view holds it
    del view
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use - 1


def test_views_keep_the_runtime_alive(double):
    rt = tg.Runtime(0)
    host = rt.host_alloc(64)
    array = np.frombuffer(host, np.uint8) if np is not None else memoryview(host).cast("B")
    rt.close()
    host.close()
    del host
    gc.collect()
    assert double.primary_refcount(0) == 1
    array[0] = 3
    del array
    gc.collect()
    assert double.primary_refcount(0) == 0


# A view read after host_trim(): before views were counted the trim unmapped
# the block under it and the interpreter died (SIGSEGV).
TRIM = """if True:
    import sys
    import tenferro_gpu as tg
    rt = tg.Runtime(0)
    host = rt.host_alloc(1 << 20)
    view = memoryview(host).cast("B")
    array = memoryview(host).cast("B").cast("f")
    for i in range(0, len(array), 4096):
        array[i] = 2.5
    host.close()
    fresh = rt.host_alloc(1 << 20)
    fresh[0] = 0x11
    fresh.close()
    rt.host_trim()
    print(view[0] != 0x11, all(array[i] == 2.5 for i in range(0, len(array), 4096)), flush=True)
    del view, array
    rt.host_trim()
    print(tg.speedups_enabled() or sys.version_info >= (3, 12),
          rt.host_stats().blocks_cached, rt.host_stats().blocks_in_use)
"""


@pytest.mark.parametrize("speedups", ["1", "0"])
def test_a_view_survives_host_trim(speedups):
    env = dict(os.environ, TENFERRO_GPU_SPEEDUPS=speedups, PYTHONPATH=PACKAGE_ROOT)
    done = subprocess.run([sys.executable, "-c", TRIM], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-3000:]}"
    lines = done.stdout.splitlines()
    assert lines[0] == "True True", done.stdout
    counted, cached, in_use = lines[1].split()
    if counted == "True":
        assert (cached, in_use) == ("0", "0"), done.stdout  # given back, then trimmed
