# SPDX-License-Identifier: MIT OR Apache-2.0
"""Page-locked host memory and asynchronous copies: HostBuffer, host
registration, download_async / upload_async and their Completion, the
pool's stats and trim."""

import asyncio
import gc
import weakref

import pytest

import tenferro_gpu as tg
import support

np = pytest.importorskip("numpy")


def test_host_buffer_is_a_zero_copy_buffer(rt):
    with rt.host_alloc(4096) as host:
        assert isinstance(host, tg.HostBuffer)
        assert host.nbytes == len(host) == 4096 and host.ptr != 0
        view = memoryview(host)
        assert view.nbytes == 4096 and not view.readonly
        floats = np.frombuffer(host, np.float32)
        floats[:] = np.arange(1024, dtype=np.float32)
        assert view.cast("B").cast("f")[5] == 5.0             # same memory
        assert floats.__array_interface__["data"][0] == host.ptr
        assert bytes(host[4:8]) == np.float32(1).tobytes()
        del view, floats
    assert host.closed
    with pytest.raises(ValueError, match="closed"):
        host.ptr
    host.close()                                              # idempotent


def test_host_alloc_refuses_zero_bytes(rt):
    with pytest.raises(tg.InvalidArgumentError) as e:
        rt.host_alloc(0)
    assert e.value.operation == "tf_host_alloc"
    with pytest.raises(OverflowError):
        rt.host_alloc(-1)


def test_pool_stats_follow_alloc_free_and_trim(rt):
    before = rt.host_stats()
    assert isinstance(before, tg.HostPoolStats)
    host = rt.host_alloc(5000)                                 # class 8 KiB
    s = rt.host_stats()
    assert s.blocks_in_use == before.blocks_in_use + 1
    assert s.bytes_in_use == before.bytes_in_use + 8192
    assert s.driver_allocations == before.driver_allocations + 1
    host.close()
    del host         # without counted views (ctypes before 3.12), the end of the object
    s = rt.host_stats()
    assert s.blocks_in_use == before.blocks_in_use and s.blocks_cached >= 1
    again = rt.host_alloc(8000)                                # reused
    assert rt.host_stats().driver_allocations == s.driver_allocations
    again.close()
    del again
    rt.host_trim()
    s = rt.host_stats()
    assert s.blocks_cached == 0 and s.bytes_cached == 0


def test_garbage_collection_frees_the_block_after_its_views(rt):
    host = rt.host_alloc(4096)
    view = np.frombuffer(host, np.uint8)
    ref = weakref.ref(host)
    in_use = rt.host_stats().blocks_in_use
    del host
    gc.collect()
    assert rt.host_stats().blocks_in_use == in_use            # the view holds the block
    del view
    gc.collect()
    assert ref() is None
    assert rt.host_stats().blocks_in_use == in_use - 1


def test_a_block_keeps_its_runtime_alive(double):
    rt = tg.Runtime(0)
    host = rt.host_alloc(64)
    rt.close()
    assert double.primary_refcount(0) == 1
    host[0] = 7
    host.close()
    del host         # without counted views (ctypes before 3.12), the end of the object
    assert double.primary_refcount(0) == 0


def test_async_round_trip_through_a_host_buffer(rt):
    data = np.arange(256, dtype=np.float32)
    with rt.alloc(data.nbytes) as buf, rt.host_alloc(data.nbytes) as host:
        np.frombuffer(host, np.float32)[:] = data
        up = rt.upload_async(host, buf)
        assert isinstance(up, tg.Completion)
        up.wait()
        assert up.done()
        np.frombuffer(host, np.float32)[:] = 0
        down = rt.download_async(buf, host)
        down.wait()
        assert np.array_equal(np.frombuffer(host, np.float32), data)
        # a view inside the block, and a device offset
        part = np.frombuffer(host, np.float32)[8:16]
        rt.download_async(buf, part, offset=4 * 100).wait()
        assert part.tolist() == list(range(100, 108))
        up.close()
        down.close()


def test_completion_reports_pending_work_and_holds_the_buffers(double, rt):
    with rt.alloc(64) as buf, rt.host_alloc(64) as host:
        rt.sync()
        double.set_execution(1)                              # TFD_EXEC_DEFERRED
        done = rt.download_async(buf, host)
        assert not done.done()
        assert done._keep is not None and host in [
            getattr(k, "obj", None) for k in done._keep]
        rt.wait_event(done.event)                              # orders other work
        done.wait()
        assert done.done() and done._keep is None
        done.close()


def test_completion_is_awaitable_without_blocking_the_loop(double, rt):
    with rt.alloc(16) as buf, rt.host_alloc(16) as host:
        buf.upload(b"0123456789abcdef")
        rt.sync()
        double.set_execution(1)
        done = rt.download_async(buf, host)
        ticks = []

        async def ticker():
            while not done.done():
                ticks.append(1)
                if len(ticks) == 3:
                    double.drain_all()                          # the device finishes
                await asyncio.sleep(0)

        async def main():
            await asyncio.gather(done, ticker())
        asyncio.run(main())
        assert len(ticks) >= 3                                   # the loop ran meanwhile
        assert bytes(host) == b"0123456789abcdef"


def test_registered_memory_takes_async_copies(rt):
    data = bytearray(b"registered!" * 100)
    with rt.alloc(len(data)) as buf:
        with rt.host_register(data) as reg:
            assert isinstance(reg, tg.HostRegistration)
            assert reg.nbytes == len(data) and reg.obj is data
            assert rt.host_stats().bytes_registered >= len(data)
            with pytest.raises(BufferError):
                data.extend(b"x")                                # held
            rt.upload_async(reg, buf).wait()
            out = bytearray(len(data))
            with rt.host_register(out):
                rt.download_async(buf, out).wait()
            assert out == data
            reg.record_use()
        assert reg.closed
        data.extend(b"x")                                        # released
        assert rt.host_stats().bytes_registered == 0


def test_register_refuses_read_only_and_overlapping_memory(rt):
    with pytest.raises(TypeError, match="writable"):
        rt.host_register(b"read only")
    data = bytearray(8192)
    with rt.host_register(data):
        with pytest.raises(tg.InvalidArgumentError) as e:
            rt.host_register(memoryview(data)[4096:])
        assert e.value.operation == "tf_host_register"


def test_async_copies_refuse_untracked_host_memory(rt):
    with rt.alloc(16) as buf:
        with pytest.raises(tg.InvalidArgumentError) as e:
            rt.download_async(buf, bytearray(16))
        assert "tf_host_alloc" in e.value.message and "tf_host_register" in e.value.message
        with pytest.raises(tg.InvalidArgumentError):
            rt.upload_async(bytes(16), buf)
        with rt.host_alloc(32) as host:
            with pytest.raises(ValueError, match="do not fit"):
                rt.download_async(buf, host)                     # 32 > 16 bytes
        with pytest.raises(ValueError, match="closed"):
            rt.download_async(buf, host)


def test_record_use_needs_a_tracked_address(rt):
    with rt.host_alloc(64) as host:
        host.record_use()
        rt.stream_enqueue(lambda stream: None)
        host.record_use(rt.bind_slot(0))
    with pytest.raises(ValueError, match="closed"):
        host.record_use()


def test_failures_of_the_driver_reach_the_caller(double, rt):
    double.inject("cuMemHostAlloc", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError) as e:
        rt.host_alloc(1 << 20)
    assert e.value.operation == "tf_host_alloc"
    with rt.alloc(64) as buf, rt.host_alloc(64) as host:
        double.inject("cuMemcpyDtoHAsync", 1, support.CUDA_ERROR_UNKNOWN)
        with pytest.raises(tg.CudaError) as e:
            rt.download_async(buf, host)
        assert e.value.operation == "tf_download_async"
    data = bytearray(4096)
    double.inject("cuMemHostRegister", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError):
        rt.host_register(data)
    data.extend(b"x")                                            # not held after the failure


def test_missing_functions_raise_only_when_called(monkeypatch, rt):
    from tenferro_gpu import _capi
    monkeypatch.setattr(_capi.api(), "tf_host_alloc", _capi._Missing("tf_host_alloc", "old"))
    with pytest.raises(tg.MissingFunctionError, match="tf_host_alloc"):
        rt.host_alloc(64)
