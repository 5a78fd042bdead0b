# SPDX-License-Identifier: MIT OR Apache-2.0
"""On a real GPU: the slot stream, wrapped by PyTorch and CuPy, orders their
work with the library's.  Marked gpu: runs only with TF_TEST_MODE=gpu.

Each test makes the device busy for a while first (a spin or a batch of
large matrix products) and checks the work is still running, so that a
result can only be right if the ordering is.  Later areas add files of
their own (test_gpu_<area>.py) on the fixtures of conftest.py:
torch_cuda, torch_slot_stream, cupy_cuda, cupy_slot_stream, and `spin`
below for a stream that stays busy.
"""

import threading

import pytest

import tenferro_gpu as tg
import support

pytestmark = pytest.mark.gpu

# GPU clock cycles for torch.cuda._sleep: about 0.15 s at the H200's 1.98 GHz.
SPIN_CYCLES = 300_000_000


def spin(torch, stream):
    """Keep `stream` busy for SPIN_CYCLES; return an event recorded after."""
    with torch.cuda.stream(stream):
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(SPIN_CYCLES)
        else:                             # the same effect, less precisely
            a = torch.ones((8192, 8192), device="cuda")
            for _ in range(12):
                a @ a
    done = torch.cuda.Event()
    done.record(stream)
    assert not done.query(), "the spin finished at once; raise SPIN_CYCLES"
    return done


def test_torch_uses_the_same_primary_context(rt, torch_cuda, raw):
    # torch made the device's primary context current on this thread
    assert raw.current() == rt.primary_context


def test_the_slot_stream_is_torchs_current_stream_inside(rt, torch_slot_stream, torch_cuda):
    with torch_cuda.cuda.stream(torch_slot_stream):
        assert torch_cuda.cuda.current_stream().cuda_stream == rt.stream()


def test_sync_waits_for_torch_work_on_the_slot_stream(rt, torch_slot_stream, torch_cuda):
    torch = torch_cuda
    done_spinning = spin(torch, torch_slot_stream)
    with torch.cuda.stream(torch_slot_stream):
        x = torch.full((1 << 20,), 1.0, device="cuda")
        x.mul_(3)
    done = torch.cuda.Event()
    done.record(torch_slot_stream)
    rt.sync()
    assert done_spinning.query() and done.query()
    assert x.sum().item() == 3 * (1 << 20)


def test_torch_and_library_work_interleave_in_order(rt, torch_slot_stream, torch_cuda, raw):
    torch = torch_cuda
    before = raw.current()
    spin(torch, torch_slot_stream)
    with torch.cuda.stream(torch_slot_stream):
        x = torch.arange(1 << 16, device="cuda", dtype=torch.float32)

    def inside():
        # the primary context is current; torch enqueues on the same stream
        assert raw.current() == rt.primary_context
        with torch.cuda.stream(torch_slot_stream):
            return x + 1
    y = rt.with_context(inside)
    assert raw.current() == before
    with torch.cuda.stream(torch_slot_stream):
        z = y * 2
    rt.sync()
    expected = (torch.arange(1 << 16, dtype=torch.float32) + 1) * 2
    assert torch.equal(z.cpu(), expected)


def test_other_slots_are_not_waited_for(torch_cuda):
    torch = torch_cuda
    with tg.Runtime(0, stream_slots=2) as rt:
        slot0, slot1 = rt.bind_slot(0), rt.bind_slot(1)
        busy = support.torch_external_stream(torch, slot1.stream())
        done = spin(torch, busy)
        slot0.sync()
        assert not done.query(), "syncing slot 0 waited for slot 1"
        slot1.sync()
        assert done.query()
        slot0.close()
        slot1.close()


def test_each_thread_gets_its_own_stream_for_torch(rt, torch_cuda):
    torch = torch_cuda
    results, failures = {}, []

    def work(i):
        try:
            s = support.torch_external_stream(torch, rt.stream())
            with torch.cuda.stream(s):
                v = torch.arange(1024, device="cuda", dtype=torch.int64) * i
            rt.sync()
            results[i] = (rt.stream(), v.sum().item())
        except BaseException as e:
            failures.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len({stream for stream, _ in results.values()}) == 4
    for i, (_, total) in results.items():
        assert total == i * 1023 * 1024 // 2


def test_cupy_on_the_slot_stream(rt, cupy_slot_stream, cupy_cuda):
    cupy = cupy_cuda
    with cupy_slot_stream:
        assert cupy.cuda.get_current_stream().ptr == rt.stream()
        a = cupy.ones((8192, 8192), dtype=cupy.float32)
        for _ in range(12):
            b = a @ a
        done = cupy_slot_stream.record()
    assert not done.done, "the products finished at once; make them larger"
    rt.sync()
    assert done.done
    assert float(b[0, 0]) == 8192.0
