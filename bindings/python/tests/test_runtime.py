# SPDX-License-Identifier: MIT OR Apache-2.0
"""Runtime: lifetime (context manager, close, clone, bind_slot, garbage
collection), options, queries and the slot streams."""

import copy
import os
import gc
import threading

import pytest

import tenferro_gpu as tg
import support


def test_with_block_releases_the_runtime(double):
    streams = double.live(support.TFD_STREAMS)
    with tg.Runtime(0) as rt:
        assert double.primary_refcount(0) == 1
        rt.stream()
        assert double.live(support.TFD_STREAMS) == streams + 1
    assert rt.closed
    assert double.primary_refcount(0) == 0
    assert double.live(support.TFD_STREAMS) == streams


def test_close_is_idempotent_and_a_closed_runtime_refuses_use():
    rt = tg.Runtime(0)
    assert not rt.closed
    rt.close()
    rt.close()
    assert rt.closed
    for use in (lambda: rt.handle, rt.sync, rt.stream, lambda: rt.identity,
                lambda: rt.with_context(lambda: None), rt.clone,
                lambda: rt.bind_slot(0), lambda: rt.__enter__()):
        with pytest.raises(ValueError, match="Runtime is closed"):
            use()
    assert repr(rt) == "<tenferro_gpu.Runtime (closed)>"


def test_garbage_collection_releases_a_forgotten_runtime(double):
    rt = tg.Runtime(0)
    assert double.primary_refcount(0) == 1
    del rt
    gc.collect()
    assert double.primary_refcount(0) == 0


def test_clone_shares_the_runtime_and_keeps_it_alive(double):
    rt = tg.Runtime(0, stream_slots=3)
    twin = rt.clone()
    third = copy.copy(rt)
    assert twin.handle == rt.handle == third.handle
    assert twin.identity == rt.identity and twin.slot_count == 3
    rt.close()
    third.close()
    assert double.primary_refcount(0) == 1
    twin.sync()
    assert twin.stream() != 0
    twin.close()
    assert double.primary_refcount(0) == 0


def test_from_handle_takes_its_own_reference(double):
    rt = tg.Runtime(0)
    other = tg.Runtime.from_handle(rt.handle)
    assert other.identity == rt.identity
    rt.close()
    other.sync()
    assert double.primary_refcount(0) == 1
    other.close()
    assert double.primary_refcount(0) == 0


def test_identity_and_allocation_domain():
    with tg.Runtime(0) as a, tg.Runtime(0) as b:
        bound = a.bind_slot(0)
        assert a.identity != b.identity
        assert bound.identity == a.identity == a.clone().identity
        assert bound.allocation_domain == a.allocation_domain
        assert a.allocation_domain != b.allocation_domain
        assert a.allocation_domain not in (a.identity, b.identity)
        bound.close()


def test_options_reach_the_library():
    with tg.Runtime(0, stream_slots=3, cublas_workspace_bytes=0,
                    retirement_capacity=5) as rt:
        assert rt.slot_count == 3
    with tg.Runtime(0) as rt:
        assert rt.slot_count == 8       # TF_DEFAULT_STREAM_SLOTS
    with pytest.raises(tg.InvalidArgumentError, match="stream_slots 0 is outside 1..256") as e:
        tg.Runtime(0, stream_slots=0)
    assert e.value.operation == "tf_runtime_new_with_options"
    with pytest.raises(tg.InvalidArgumentError, match="retirement_capacity 0 is outside"):
        tg.Runtime(0, retirement_capacity=0)


def test_download_options_reach_the_library():
    with tg.Runtime(0, download_threads=2, download_chunk_bytes=64 << 10) as rt:
        data = bytes(range(256)) * 2048              # 512 KiB: staged in 64 KiB chunks
        with rt.alloc(len(data)) as buf:
            buf.upload(data)
            assert bytes(buf.download()) == data
    with pytest.raises(tg.InvalidArgumentError, match="download_threads") as e:
        tg.Runtime(0, download_threads=65)
    assert e.value.operation == "tf_runtime_new_with_options"
    with pytest.raises(tg.InvalidArgumentError, match="download_chunk_bytes"):
        tg.Runtime(0, download_chunk_bytes=4097)
    with pytest.raises(tg.InvalidArgumentError) as e:
        tg.Runtime(-1)
    assert e.value.operation == "tf_runtime_new"


def test_values_c_cannot_hold_are_refused_before_the_call():
    with pytest.raises(OverflowError, match="stream_slots=-1 does not fit the C uint32_t"):
        tg.Runtime(0, stream_slots=-1)
    with pytest.raises(OverflowError, match="ordinal"):
        tg.Runtime(1 << 32)
    with pytest.raises(TypeError, match="stream_slots must be an integer"):
        tg.Runtime(0, stream_slots="4")
    with pytest.raises(TypeError):
        tg.Runtime(0, stream_slots=2.0)


def test_device_matches_device_info(rt):
    dev = rt.device
    assert dev == tg.device_info(0) == tg.devices()[0]
    assert dev.ordinal == 0 and dev.name
    assert dev.total_memory_bytes > 0 and dev.multiprocessor_count > 0
    assert dev.compute_capability >= (7, 0)
    assert dev.uuid_string == f"GPU-{dev.uuid}"


def test_supports_answers_known_and_unknown_capabilities(rt):
    assert rt.supports(tg.Capability.RAW_STREAM) is True
    assert rt.supports(tg.Capability.PEER_COPY) is False
    assert rt.supports(1000) is False
    for cap in tg.Capability:
        assert rt.supports(cap) in (True, False)


def test_primary_context_is_the_devices(rt, double):
    assert rt.primary_context == double.primary_context(0)


def test_stream_is_created_once_non_blocking_in_the_primary_context(rt, raw):
    s = rt.stream()
    assert isinstance(s, int) and s != 0
    assert rt.stream() == s == rt.slot_stream(rt.current_slot)
    if support.DOUBLE is not None:
        assert support.DOUBLE.stream_flags(s) == support.CU_STREAM_NON_BLOCKING
        assert support.DOUBLE.stream_context(s) == rt.primary_context
        assert support.DOUBLE.call_count("cuStreamCreate") == 1


def test_each_slot_has_its_own_stream():
    with tg.Runtime(0, stream_slots=4) as rt:
        streams = [rt.slot_stream(i) for i in range(4)]
        assert len(set(streams)) == 4
        with pytest.raises(tg.InvalidArgumentError, match="slot 4 is outside 0..3"):
            rt.slot_stream(4)


def test_threads_get_their_slots_and_their_streams():
    rt = tg.Runtime(0, stream_slots=64)
    seen = {}

    def ask(i):
        seen[i] = (rt.current_slot, rt.stream())
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
        t.join()                      # one after the other: consecutive numbers
    slots = [seen[i][0] for i in range(4)]
    assert len(set(slots)) == 4
    assert [(s - slots[0]) % 64 for s in slots] == [0, 1, 2, 3]
    for slot, stream in seen.values():
        assert rt.slot_stream(slot) == stream
    rt.close()


def test_a_bound_handle_uses_its_slot_from_every_thread():
    with tg.Runtime(0, stream_slots=4) as rt:
        bound = rt.bind_slot(2)
        found = []
        t = threading.Thread(target=lambda: found.append((bound.current_slot, bound.stream())))
        t.start()
        t.join()
        assert found == [(2, rt.slot_stream(2))]
        assert bound.current_slot == 2 and bound.stream() == rt.slot_stream(2)
        rebound = bound.bind_slot(3)
        assert rebound.current_slot == 3
        rebound.close()
        bound.close()
        with pytest.raises(tg.InvalidArgumentError):
            rt.bind_slot(-1)


def test_sync_reports_a_failed_wait(double, rt):
    rt.stream()
    double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
    with pytest.raises(tg.CudaError) as caught:
        rt.sync()
    assert caught.value.operation == "tf_runtime_sync"
    assert caught.value.call == "cuStreamSynchronize"
    assert caught.value.code == support.CUDA_ERROR_UNKNOWN
    assert "CUDA_ERROR_UNKNOWN (999)" in caught.value.message
    rt.sync()


def test_repr_names_identity_and_device(rt):
    assert repr(rt) == (f"<tenferro_gpu.Runtime identity={rt.identity} device=0 "
                        f"handle=0x{rt.handle:x}>")


def test_a_forked_child_gets_runtime_state_error(rt):
    rt.stream()
    pid = os.fork()
    if pid == 0:                       # the child: never return into pytest
        code = 3
        try:
            rt.sync()
            code = 1
        except tg.RuntimeStateError as e:
            code = 0 if e.operation == "tf_runtime_sync" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    rt.sync()                          # the parent is unaffected
