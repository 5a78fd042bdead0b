# SPDX-License-Identifier: MIT OR Apache-2.0
"""Dropping every handle tears the runtime down, retirements pending or
not: the binding's own releases hold no runtime reference, and its last
reference first syncs the slots with retirements pending, so that they
free what they hold while the runtime can ("NOTE the last reference
drains" in tenferro_gpu/_runtimes.py)."""

import gc

import pytest

import tenferro_gpu as tg
import support


@pytest.fixture
def deferred(double):
    double.set_execution(1)          # TFD_EXEC_DEFERRED: the device lags
    return double


def _gone(double):
    gc.collect()
    return double.primary_refcount(0) == 0


def test_a_retired_buffer_does_not_keep_the_runtime(deferred):
    allocs = deferred.live(support.TFD_DEVICE_ALLOCS)
    rt = tg.Runtime(0)
    buf = rt.alloc(64)
    buf.upload(b"x" * 64)
    buf.retire()                     # pending: the device has not passed it
    del buf, rt
    assert _gone(deferred)           # torn down (its primary context released)
    assert deferred.live(support.TFD_DEVICE_ALLOCS) == allocs   # freed, not leaked


def test_the_retirement_of_a_closed_buffer_on_another_slot_drains_too(deferred):
    allocs = deferred.live(support.TFD_DEVICE_ALLOCS)
    rt = tg.Runtime(0, stream_slots=2)
    with rt.bind_stream(1) as stream:
        buf = stream.alloc(32)
        stream.upload(b"y" * 32, buf)
        buf.retire()
    stream.close()
    rt.close()
    del buf
    assert _gone(deferred)
    assert deferred.live(support.TFD_DEVICE_ALLOCS) == allocs


def test_a_release_without_references_runs_before_the_teardown(deferred):
    ran = []
    rt = tg.Runtime(0)
    rt.stream_enqueue(lambda stream: None)
    rt.retire(ran.append, "released")
    rt.close()
    assert ran == ["released"]
    assert _gone(deferred)


def test_a_block_held_after_a_failed_copy_does_not_keep_the_runtime(deferred):
    rt = tg.Runtime(0)
    buf = rt.alloc(4096)
    buf.upload(b"z" * 4096)
    host = rt.host_alloc(4096)
    deferred.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError):
        rt.download(buf, host)
    del host, buf, rt
    assert _gone(deferred)


def test_a_release_holding_a_runtime_keeps_it_until_a_sync(deferred):
    # The user's own release keeps what its arguments reference, as
    # documented: here the runtime itself, until a sync runs it.
    rt = tg.Runtime(0)
    rt.stream_enqueue(lambda stream: None)
    keeper = rt.clone()
    rt.retire(lambda runtime: None, keeper)
    del keeper
    gc.collect()
    assert deferred.primary_refcount(0) == 1
    rt.sync()
    rt.close()
    assert _gone(deferred)
