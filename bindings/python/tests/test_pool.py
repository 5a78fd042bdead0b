# SPDX-License-Identifier: MIT OR Apache-2.0
"""The device's memory pool (tenferro_gpu/pool.py): statistics, peak reset,
empty_cache, the memory options, and uses on other slots, recorded by the
binding's calls or by hand."""

import ctypes
import dataclasses
import threading

import pytest

import tenferro_gpu as tg
import support

MIB = 1 << 20
DEFAULT_RELEASE_THRESHOLD = (1 << 64) - 1


def _consistent(s):
    assert s.in_use_bytes <= s.reserved_bytes <= s.reserved_peak, s
    assert s.in_use_bytes <= s.in_use_peak and s.frees <= s.allocations, s


def test_memory_stats_count_allocations_peaks_and_trims(rt):
    before = rt.memory_stats()
    assert (before.release_threshold, before.reserved_limit) == (DEFAULT_RELEASE_THRESHOLD, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.frees = 0
    big = rt.alloc(MIB)
    small = rt.empty(1024, "uint32")
    s = rt.memory_stats()
    _consistent(s)
    assert s.cached == rt.supports(tg.Capability.STREAM_ORDERED_ALLOC)
    assert s.in_use_bytes == before.in_use_bytes + MIB + 4096
    assert (s.allocations, s.frees) == (before.allocations + 2, before.frees)
    big.free()
    rt.sync()
    after = rt.memory_stats()
    _consistent(after)
    assert (after.in_use_bytes, after.frees) == (s.in_use_bytes - MIB, s.frees + 1)
    assert after.in_use_peak >= s.in_use_bytes
    with rt.bind_stream(1) as other_slot, tg.Runtime(0) as other_runtime:
        assert other_slot.memory_stats() == after == other_runtime.memory_stats()
    rt.reset_peak_memory_stats()
    reset = rt.memory_stats()
    assert (reset.in_use_peak, reset.reserved_peak) == (reset.in_use_bytes, reset.reserved_bytes)
    rt.empty_cache()
    trimmed = rt.memory_stats()
    _consistent(trimmed)
    assert trimmed.trims == reset.trims + int(trimmed.cached)
    assert trimmed.reserved_bytes <= reset.reserved_bytes
    if support.DOUBLE is not None:
        assert trimmed.reserved_bytes == trimmed.in_use_bytes     # the double keeps nothing
    rt.empty_cache(keep_bytes=4 * MIB)
    assert rt.memory_stats().trims == trimmed.trims + int(trimmed.cached)
    small.free()


def test_bad_arguments_are_refused_before_the_library(rt):
    with pytest.raises(OverflowError):
        rt.empty_cache(-1)
    with pytest.raises(TypeError):
        rt.empty_cache(1.5)
    with pytest.raises(OverflowError):
        tg.Runtime(0, memory_reserved_limit=1 << 64)
    rt.close()
    for call in (rt.memory_stats, rt.reset_peak_memory_stats, rt.empty_cache):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_double_without_memory_pools_the_stats_say_uncached(double):
    double.set_attribute(0, support.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0)
    with tg.Runtime(0) as rt, rt.alloc(4096) as buf:
        s = rt.memory_stats()
        assert not s.cached and s.reserved_bytes == s.in_use_bytes == 4096, s
        rt.empty_cache()                     # nothing to give back
        assert rt.memory_stats().trims == 0
        buf.record_use(rt.bind_stream(1))    # checks the address only


def test_double_a_failed_stats_read_raises_the_librarys_error(double, rt):
    rt.alloc(64).free()
    double.inject("cuMemPoolGetAttribute", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError) as e:
        rt.memory_stats()
    assert (e.value.operation, e.value.call) == ("tf_memory_stats", "cuMemPoolGetAttribute")
    double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError) as e:
        rt.empty_cache()
    assert e.value.operation == "tf_memory_trim"
    _consistent(rt.memory_stats())           # the next read works


def test_the_memory_options_reach_the_devices_pool():
    rt = tg.Runtime(0, memory_release_threshold=MIB, memory_reserved_limit=64 * MIB)
    rt.alloc(64).free()              # the pool's driver object comes with it
    s = rt.memory_stats()
    if not s.cached:
        rt.close()
        pytest.skip("the device has no memory pools: its options are not shown")
    assert (s.release_threshold, s.reserved_limit) == (MIB, 64 * MIB)
    # The pool is the device's: another value is refused while it lives, and
    # a field left unset takes the pool's.
    with pytest.raises(tg.InvalidArgumentError) as e:
        tg.Runtime(0, memory_reserved_limit=128 * MIB)
    assert e.value.operation == "tf_runtime_new_with_options"
    assert "memory_reserved_limit 134217728 differs from the 67108864" in e.value.message
    with tg.Runtime(0, stream_slots=2) as same:
        assert same.memory_stats().reserved_limit == 64 * MIB
    # The limit holds: past it the pool gives back and retries, then fails.
    six = rt.alloc(48 * MIB)
    with pytest.raises(tg.OutOfMemoryError) as e:
        rt.alloc(32 * MIB)
    assert e.value.operation == "tf_alloc" and "memory_reserved_limit" in e.value.message
    s = rt.memory_stats()
    assert (s.oom_retries, s.oom_failures) == (1, 1)
    six.free()
    rt.close()
    with pytest.raises(tg.InvalidArgumentError, match="below TF_MIN_MEMORY_RESERVED_LIMIT"):
        tg.Runtime(0, memory_reserved_limit=4096)
    # Once the device's runtimes are gone, a new pool takes new options.
    with tg.Runtime(0, memory_reserved_limit=128 * MIB) as rt:
        assert rt.memory_stats().reserved_limit == 128 * MIB


def test_record_use_checks_its_address(rt):
    buf = rt.empty(8, "uint64")
    buf.record_use(rt.bind_stream(1))
    buf[7:].record_use()
    rt.record_use(buf.ptr + 63)
    with rt.alloc(0) as empty:
        empty.record_use()                   # nothing to record
    with pytest.raises(tg.InvalidArgumentError) as e:
        rt.record_use(0)
    assert e.value.operation == "tf_memory_record_use"
    host = ctypes.create_string_buffer(8)
    with pytest.raises(tg.InvalidArgumentError, match="is not inside a live tf_alloc"):
        rt.record_use(ctypes.addressof(host))
    with pytest.raises(tg.InvalidArgumentError):
        rt.record_use(buf.ptr + 64)          # one past the end
    buf.free()
    with pytest.raises(ValueError):
        buf.record_use()
    with pytest.raises(TypeError):
        rt.record_use("0x10")


N = 4096


def _free_while_slot_1_writes(rt, write):
    """Slot 1 writes 0x55 over x, a buffer of slot 0, through `write`; x is
    freed on slot 0 and the pool hands its memory to y there, which is
    filled with 0xAA.  The byte y holds once both slots ran: 0xAA when the
    free waited for slot 1's work, 0x55 when that work landed in y."""
    s0, s1 = rt.bind_stream(0), rt.bind_stream(1)      # no `with`: not current
    src = s1.to_device(b"\x55" * N)
    x = s0.alloc(N)
    address = x.ptr
    write(s1, src, x)
    x.free()
    y = s0.alloc(N)
    assert y.ptr == address, "stream order on slot 0: the pool hands it out at once"
    s0.upload(b"\xaa" * N, y)
    s0.sync()
    s1.sync()
    back = s0.download(y, bytearray(N))
    y.free()
    src.free()
    s0.close()
    s1.close()
    assert back == bytes([back[0]]) * N, "one write or the other, whole"
    return back[0]


def test_double_a_buffer_used_on_another_slot_is_freed_after_that_work(double, rt):
    if not rt.supports(tg.Capability.STREAM_ORDERED_ALLOC):
        pytest.skip("uncached: every free waits for the device")
    double.set_execution(1)          # TFD_EXEC_DEFERRED: slot 1 lags
    # The binding's own call records the use: the free waits for slot 1.
    assert _free_while_slot_1_writes(rt, lambda s1, src, x: s1.copy(src, x)) == 0xAA
    # Work queued on raw addresses is not recorded: the double shows the
    # hazard the record prevents, so the line above can fail ...
    def raw(s1, src, x):
        s1.copy(src.ptr, x.ptr, N)
    assert _free_while_slot_1_writes(rt, raw) == 0x55
    # ... unless it is recorded by hand.
    def recorded(s1, src, x):
        raw(s1, src, x)
        x.record_use(s1)
    assert _free_while_slot_1_writes(rt, recorded) == 0xAA


def _event_records(double, fn):
    before = double.call_count("cuEventRecord")
    fn()
    return double.call_count("cuEventRecord") - before


def _uses(rt, theirs, kernel):
    """Each call of the binding that queues work with buffer b on `s`."""
    def launch(s, b):
        s.launch(kernel, 1, 64, [theirs, theirs, b, ctypes.c_uint32(64)])

    def download_async(s, b):
        with s.host_alloc(256) as host:
            s.download_async(b, host).wait()

    def upload_async(s, b):
        with s.host_alloc(256) as host:
            s.upload_async(host, b).wait()
    return {
        "upload": lambda s, b: s.upload(b"\x03" * 256, b),
        "copy from": lambda s, b: s.copy(b, theirs),
        "copy into": lambda s, b: s.copy(theirs, b),
        "copy into a view": lambda s, b: s.copy(theirs[:8], b[8:16]),
        "gemm": lambda s, b: tg.blas.matmul(s, theirs, theirs, b, 8, 8, 8),
        "download_async": download_async,
        "upload_async": upload_async,
        "peer_copy": lambda s, b: s.peer_copy(theirs, rt, b),
        "launch": launch,
    }


def test_double_every_call_that_queues_work_records_its_operands_of_other_slots(double, rt):
    if not rt.supports(tg.Capability.STREAM_ORDERED_ALLOC):
        pytest.skip("uncached: nothing is recorded")
    s0, s1, same_slot = rt.bind_stream(0), rt.bind_stream(1), rt.bind_stream(0)
    theirs = s1.to_device(bytes(256)).view("float32")
    program = rt.compile(support.ADD_SOURCE)
    module = rt.load_module(program)
    kernel = module.function("tfd_add_f32")

    def case(by, use):
        buf = s0.empty(64, "float32")
        s0.sync()
        use(by, buf)
        (by or rt).sync()
        return _event_records(double, buf.free)
    for what, use in _uses(rt, theirs, kernel).items():
        assert case(s1, use) == 1, f"{what} on another slot"
        assert case(same_slot, use) == 0, f"{what} on the buffer's own slot"
    # Downloads return once the device is done: nothing to record.
    assert case(s1, lambda s, b: s.download(b, bytearray(256))) == 0
    # An unbound handle's call uses the calling thread's slot.
    def unbound(results):
        results.append((rt.current_slot, case(None, lambda s, b: rt.upload(b"\x04" * 256, b))))
    seen = []
    unbound(seen)
    for _ in range(2):
        thread = threading.Thread(target=unbound, args=(seen,))
        thread.start()
        thread.join()
    assert [(slot, int(slot != 0)) for slot, _ in seen] == seen, seen
    assert {slot for slot, _ in seen} != {0}, "some thread used another slot"
    # Another runtime of the device: its slot's use is recorded too.
    with tg.Runtime(0) as rt2:
        s2 = rt2.bind_stream(0)
        assert case(s2, lambda s, b: s.upload(b"\x04" * 256, b)) == 1
        s2.close()
    kernel.close()
    module.close()
    program.close()
    theirs.base.free()
    for s in (s0, s1, same_slot):
        s.close()
