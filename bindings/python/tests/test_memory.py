# SPDX-License-Identifier: MIT OR Apache-2.0
"""Device memory and transfers: DeviceBuffer ownership, uploads from any
readable buffer, downloads into any writable one, scalars, copies."""

import array
import gc
import threading

import pytest

import tenferro_gpu as tg
import support

np = pytest.importorskip("numpy")


def test_round_trip_through_every_kind_of_buffer(rt):
    data = np.arange(1000, dtype=np.float32)
    with rt.alloc(data.nbytes) as buf:
        assert buf.nbytes == len(buf) == 4000 and buf.ptr != 0
        buf.upload(data)
        assert np.array_equal(buf.download(np.empty(1000, np.float32)), data)
        assert bytes(buf.download()) == data.tobytes()          # a new bytearray
        view = memoryview(bytearray(8))
        rt.download(buf, view, offset=4)
        assert bytes(view) == data[1:3].tobytes()
        buf.upload(b"\x00" * 4, offset=8)                       # bytes
        buf.upload(array.array("f", [7.0]), offset=12)          # array.array
        out = np.empty(4, np.float32)
        rt.download(buf.ptr, out)                               # a plain address
        assert out.tolist() == [0.0, 1.0, 0.0, 7.0]


def test_large_pageable_downloads_take_the_pipelined_path(rt):
    # above 64 KiB a pageable destination goes through the staging pipeline
    data = np.random.default_rng(1).integers(0, 1 << 30, size=3 << 18, dtype=np.int64)
    with rt.alloc(data.nbytes) as buf:
        buf.upload(data)
        out = np.zeros_like(data)
        buf.download(out)
        assert np.array_equal(out, data)
        fortran = np.asfortranarray(np.zeros((3 << 9, 1 << 9), np.int64))
        buf.download(fortran)
        assert np.array_equal(fortran.ravel(order="F"), data)


def test_download_scalar_reads_small_values(rt):
    with rt.alloc(32) as buf:
        buf.upload(np.array([1.5, -2.25, 3.0, 4.0], np.float64))
        assert rt.download_scalar(buf) == 1.5
        assert rt.download_scalar(buf, "d", offset=8) == -2.25
        assert rt.download_scalar(buf, "2d", offset=16) == (3.0, 4.0)
        assert rt.download_scalar(buf.ptr + 8, "q") == np.float64(-2.25).view(np.int64)
        with pytest.raises(ValueError, match="at most 16"):
            rt.download_scalar(buf, "3d")
        with pytest.raises(ValueError, match="do not fit"):
            rt.download_scalar(buf, "d", offset=28)


def test_copies_between_buffers(rt):
    with rt.alloc(16) as a, rt.alloc(16) as b:
        a.upload(bytes(range(16)))
        rt.copy(a, b)
        assert bytes(b.download()) == bytes(range(16))
        rt.copy(a, b, 4, src_offset=12, dst_offset=0)
        assert bytes(b.download())[:4] == bytes(range(12, 16))
        with pytest.raises(tg.InvalidArgumentError) as e:
            rt.copy(a.ptr, a.ptr + 4, 8)                        # overlap
        assert e.value.operation == "tf_copy"
        with pytest.raises(TypeError, match="nbytes"):
            rt.copy(a.ptr, b)


def test_peer_copy_on_one_device(rt):
    with tg.Runtime(0) as other, rt.alloc(8) as a, other.alloc(8) as b:
        assert rt.peer_copy_available(other)
        a.upload(b"peercopy")
        rt.peer_copy(a, other, b)
        rt.sync()
        assert bytes(b.download()) == b"peercopy"


def test_bounds_and_buffer_kinds_are_checked_before_anything_is_queued(rt):
    with rt.alloc(8) as buf:
        with pytest.raises(ValueError, match="16 bytes at offset 0 do not fit"):
            buf.upload(bytes(16))
        with pytest.raises(ValueError, match="do not fit"):
            buf.download(bytearray(4), offset=6)
        with pytest.raises(TypeError, match="writable"):
            rt.download(buf, b"readonly")
        with pytest.raises(TypeError, match="buffer protocol"):
            buf.upload([1, 2, 3])
        with pytest.raises(BufferError, match="contiguous"):
            buf.download(np.zeros((4, 4), np.uint8)[:, ::2])
        with pytest.raises(OverflowError):
            rt.upload(b"x", -1)


def test_an_address_that_is_not_device_memory_is_refused(rt):
    host = np.zeros(4, np.uint8)
    with pytest.raises(tg.InvalidArgumentError) as e:
        rt.upload(b"abcd", host.ctypes.data)
    assert e.value.operation == "tf_upload"


def test_free_is_idempotent_and_a_freed_buffer_refuses_use(rt):
    buf = rt.alloc(4)
    buf.free()
    buf.free()
    assert buf.freed and "freed" in repr(buf)
    with pytest.raises(ValueError, match="freed"):
        buf.ptr
    with pytest.raises(ValueError, match="freed"):
        buf.upload(b"abcd")
    with rt.alloc(0) as empty:
        assert empty.ptr == 0
        empty.upload(b"")
        assert empty.download() == bytearray()


def test_double_free_collect_and_other_threads_release_the_memory(double, rt):
    before = double.live(support.TFD_DEVICE_ALLOCS)
    a, b, c = rt.alloc(64), rt.alloc(64), rt.alloc(64)
    assert double.live(support.TFD_DEVICE_ALLOCS) == before + 3
    a.free()
    del b
    gc.collect()
    rt.sync()                               # the frees are queued on the slot's stream
    assert double.live(support.TFD_DEVICE_ALLOCS) == before + 1
    t = threading.Thread(target=c.free)     # another slot: freed on c's own
    t.start()
    t.join()
    assert c.freed
    rt.sync()                               # c's slot is this thread's
    assert double.live(support.TFD_DEVICE_ALLOCS) == before


def test_double_a_buffer_keeps_its_runtime_alive(double):
    rt = tg.Runtime(0)
    buf = rt.alloc(16)
    rt.close()
    assert double.primary_refcount(0) == 1
    assert buf.runtime.identity
    buf.upload(bytes(16))                   # still usable
    buf.free()
    assert double.primary_refcount(0) == 0


def test_double_retire_frees_once_the_device_has_passed(double, rt):
    before = double.live(support.TFD_DEVICE_ALLOCS)
    buf = rt.alloc(64)
    double.set_async_pending(1)
    rt.stream()
    buf.retire()
    assert buf.freed
    rt.poll_retirements()
    assert double.live(support.TFD_DEVICE_ALLOCS) == before + 1   # not yet passed
    rt.sync()       # passes the retirement: its release queues the free ...
    rt.sync()       # ... which the stream then runs
    assert double.live(support.TFD_DEVICE_ALLOCS) == before
    stats = rt.retirement_stats()
    assert stats.deferred >= 1 and stats.released == stats.deferred and stats.in_flight == 0


@pytest.mark.parametrize("pools", [1, 0])
def test_double_failed_allocation_raises_and_leaks_nothing(double, pools):
    double.set_attribute(0, support.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, pools)
    entry = "cuMemAllocFromPoolAsync" if pools else "cuMemAlloc"
    with tg.Runtime(0) as rt:
        assert rt.supports(tg.Capability.STREAM_ORDERED_ALLOC) == bool(pools)
        # tf_alloc retries once after giving cached memory back
        double.inject(entry, 1, support.CUDA_ERROR_OUT_OF_MEMORY, 2)
        with pytest.raises(tg.OutOfMemoryError) as e:
            rt.alloc(1 << 20)
        assert (e.value.operation, e.value.call) == ("tf_alloc", entry)
        assert double.primary_refcount(0) == 1          # no clone left behind
        with rt.alloc(8) as buf:                        # the next one works
            buf.upload(b"12345678")
    assert double.primary_refcount(0) == 0


def test_double_a_failed_download_names_the_call(double, rt):
    with rt.alloc(16) as buf:
        double.inject("cuMemcpyDtoHAsync", 1, support.CUDA_ERROR_UNKNOWN, 0)
        with pytest.raises(tg.CudaError) as e:
            buf.download(bytearray(16))
        assert e.value.operation == "tf_download" and e.value.code == support.CUDA_ERROR_UNKNOWN
