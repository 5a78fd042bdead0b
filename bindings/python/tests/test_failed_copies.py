# SPDX-License-Identifier: MIT OR Apache-2.0
"""A synchronous copy to or from page-locked memory whose wait failed may
still run: tf_download / tf_upload say to keep the host memory until a
later successful sync of the slot, or leak it.  The binding keeps it until
the device has passed the copy (tenferro_gpu/_holds.py): close() and
garbage collection never hand the block out again under the stale copy."""

import gc

import pytest

import tenferro_gpu as tg
import support

N = 4096


@pytest.fixture
def source(rt):
    with rt.alloc(N) as buf:
        buf.upload(b"\xcd" * N)
        rt.sync()
        yield buf


def _failed_download(double, rt, src, dst):
    double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError) as e:
        rt.download(src, dst)
    assert (e.value.operation, e.value.call) == ("tf_download", "cuStreamSynchronize")


@pytest.mark.parametrize("how", ["close", "garbage"])
def test_the_stale_copy_never_reaches_a_fresh_block(double, rt, source, how):
    in_use = rt.host_stats().blocks_in_use
    host = rt.host_alloc(N)
    stale = host._ptr
    _failed_download(double, rt, source, host)
    if how == "close":
        host.close()
    else:
        del host
        gc.collect()
    fresh = rt.host_alloc(N)
    assert fresh.ptr != stale                    # the held block is not reused
    fresh[0] = 0x11
    rt.sync()                                    # the stale copy runs now
    assert fresh[0] == 0x11, f"fresh[0] = {fresh[0]:#x} (was 0x11)"
    fresh.close()
    del fresh
    host = None
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use   # both back after the sync


def test_a_view_of_the_block_is_held_the_same_way(double, rt, source):
    host = rt.host_alloc(N)
    in_use = rt.host_stats().blocks_in_use
    part = memoryview(host)[N // 2:]
    _failed_download(double, rt, source[: N // 2], part)
    del part
    host.close()
    del host
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use       # held, not given back
    rt.sync()
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use - 1


def test_a_failed_upload_holds_its_source(double, rt, source):
    host = rt.host_alloc(N)
    in_use = rt.host_stats().blocks_in_use
    double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError):
        rt.upload(host, source)
    host.close()
    del host
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use
    rt.sync()
    assert rt.host_stats().blocks_in_use == in_use - 1


def test_a_registered_range_stays_registered_until_the_copy_passed(double, rt, source):
    data = bytearray(N)
    reg = rt.host_register(data)
    _failed_download(double, rt, source, data)
    reg.close()
    assert reg.closed
    assert rt.host_stats().bytes_registered == N          # not yet unregistered
    with pytest.raises(BufferError):
        data.extend(b"x")                                  # still held
    rt.sync()
    assert rt.host_stats().bytes_registered == 0
    assert data[:4] == b"\xcd" * 4                         # the copy did land here
    data.extend(b"x")


def test_other_memory_stays_exported_until_the_copy_passed(double, rt, source):
    data = bytearray(N)
    _failed_download(double, rt, source, data)
    with pytest.raises(BufferError):
        data.extend(b"x")
    rt.sync()
    data.extend(b"x")


def test_a_copy_that_cannot_be_retired_leaks_the_block(double):
    rt = tg.Runtime(0)
    source = rt.alloc(N)
    host = rt.host_alloc(N)
    leaked = host.ptr
    in_use = rt.host_stats().blocks_in_use
    # The wait fails, and so does marking the point after the copy (the
    # retirement then waits for the stream, which fails too).
    double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN, 2)
    double.inject("cuEventRecord", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError):
        rt.download(source, host)
    host.close()
    del host
    rt.sync()
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use          # leaked, never reused
    source.free()
    rt.close()
    gc.collect()
    # The leaked block outlives its runtime and keeps the device's primary
    # context (docs/lifetimes.md); free it, so that the context ends and a
    # later test's sticky fault does not stay on it.
    assert double.primary_refcount(0) == 1
    assert tg._capi.api().tf_host_free(None, leaked) == 0
    assert double.primary_refcount(0) == 0
