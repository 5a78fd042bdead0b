# SPDX-License-Identifier: MIT OR Apache-2.0
"""On a real GPU: the binding's cuBLAS, transfers and kernels against
PyTorch and CuPy.  Marked gpu: runs only with TF_TEST_MODE=gpu.

Where ordering matters, the slot stream is first kept busy (test_gpu_interop's
spin), so a result is right only if the library's work and PyTorch's really
run in the order the slot stream gives them.
"""

import ctypes

import pytest

import tenferro_gpu as tg
import support
from test_gpu_interop import spin

pytestmark = pytest.mark.gpu
np = pytest.importorskip("numpy")

SHAPES = [(1, 1, 1), (7, 5, 3), (128, 64, 256), (513, 257, 129), (1024, 1024, 1024)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_gemm_through_the_binding_equals_torch_matmul(rt, torch_slot_stream, torch_cuda,
                                                      m, n, k, dtype_name):
    torch = torch_cuda
    dtype = getattr(torch, dtype_name)
    with torch.cuda.stream(torch_slot_stream):
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn((m, k), device="cuda", dtype=dtype, generator=gen)
        b = torch.randn((k, n), device="cuda", dtype=dtype, generator=gen)
        c = torch.empty((m, n), device="cuda", dtype=dtype)
    # torch's tensors are plain device addresses to the binding; the slot
    # stream orders their creation before the product
    tg.blas.matmul(rt, a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, dtype=dtype_name)
    rt.sync()
    want = torch.matmul(a.double(), b.double()).to(dtype)
    tol = 1e-3 * k ** 0.5 if dtype_name == "float32" else 1e-10 * k
    assert torch.allclose(c, want, rtol=1e-3 if dtype_name == "float32" else 1e-10, atol=tol)


def test_sgemm_on_device_buffers_equals_numpy(rt):
    m, n, k = 300, 200, 100
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    with rt.alloc(a.nbytes) as da, rt.alloc(b.nbytes) as db, rt.alloc(m * n * 4) as dc:
        da.upload(a)
        db.upload(b)
        tg.blas.matmul(rt, da, db, dc, m, n, k)
        got = dc.download(np.empty((m, n), np.float32))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-3, atol=1e-3)


def test_library_and_torch_work_interleave_on_the_slot_stream(rt, torch_slot_stream, torch_cuda):
    torch = torch_cuda
    n = 1 << 22
    host = np.arange(n, dtype=np.float32)
    with torch.cuda.stream(torch_slot_stream):
        staged = torch.empty(n, device="cuda", dtype=torch.float32)
    with rt.alloc(host.nbytes) as buf:
        spin(torch, torch_slot_stream)           # the stream is busy from here
        buf.upload(host)                         # 1. the library uploads,
        rt.copy(buf, staged.data_ptr(), host.nbytes)   # copies into torch's memory,
        with torch.cuda.stream(torch_slot_stream):
            staged.mul_(3).add_(1)               # 2. torch computes on the slot stream,
        rt.copy(staged.data_ptr(), buf, host.nbytes)   # 3. the library copies back
        out = buf.download(np.empty(n, np.float32))    #    and downloads
    np.testing.assert_array_equal(out, host * 3 + 1)


def test_downloads_into_numpy_and_pinned_torch_tensors(rt, torch_cuda):
    torch = torch_cuda
    n = 3 << 20                                  # above 64 KiB: the staged path
    data = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    with rt.alloc(data.nbytes) as buf:
        buf.upload(data)
        into_numpy = buf.download(np.empty(n, np.float32))
        pinned = torch.empty(n, dtype=torch.float32, pin_memory=True)
        assert pinned.is_pinned()
        buf.download(pinned.numpy())             # page-locked: the direct path
        pageable = torch.empty(n, dtype=torch.float32)
        buf.download(pageable.numpy())
        scalar = rt.download_scalar(buf, "f", offset=4 * 12345)
    np.testing.assert_array_equal(into_numpy, data)
    assert torch.equal(pinned, torch.from_numpy(data))
    assert torch.equal(pageable, torch.from_numpy(data))
    assert scalar == data[12345]


def test_an_nvrtc_kernel_launched_through_the_binding(rt, torch_slot_stream, torch_cuda):
    torch = torch_cuda
    n = 1_000_003
    with torch.cuda.stream(torch_slot_stream):
        x = torch.rand(n, device="cuda")
        y = torch.rand(n, device="cuda")
        out = torch.empty(n, device="cuda")
    with rt.compile(support.ADD_SOURCE) as program, rt.load_module(program) as module, \
            module.function("tfd_add_f32") as add:
        spin(torch, torch_slot_stream)
        rt.launch(add, grid=(n + 255) // 256, block=256,
                  args=(ctypes.c_uint64(x.data_ptr()), ctypes.c_uint64(y.data_ptr()),
                        ctypes.c_uint64(out.data_ptr()), ctypes.c_uint32(n)))
        with torch.cuda.stream(torch_slot_stream):
            total = (out - (x + y)).abs().max()
        rt.sync()
    assert total.item() == 0.0


def test_cupy_reads_what_the_library_wrote(rt, cupy_slot_stream, cupy_cuda):
    cupy = cupy_cuda
    n = 1 << 20
    with rt.alloc(4 * n) as buf:
        buf.upload(np.full(n, 2.5, np.float32))
        memory = cupy.cuda.UnownedMemory(buf.ptr, buf.nbytes, buf)
        view = cupy.ndarray((n,), cupy.float32, cupy.cuda.MemoryPointer(memory, 0))
        with cupy_slot_stream:
            total = float(view.sum())
    assert total == 2.5 * n


def test_events_order_two_slots_on_the_device(torch_cuda):
    torch = torch_cuda
    with tg.Runtime(0, stream_slots=2) as rt, rt.bind_slot(0) as a, rt.bind_slot(1) as b:
        sa = support.torch_external_stream(torch, a.stream())
        n = 1 << 22
        with a.alloc(4 * n) as buf, a.event() as ready:
            a.sync()                             # the allocation is usable everywhere
            spin(torch, sa)
            buf.upload(np.full(n, 1.0, np.float32))
            ready.record()                       # after the upload on slot 0
            b.wait_event(ready)                  # slot 1 waits on the device
            out = b.download(buf, np.empty(n, np.float32))
            assert (out == 1.0).all()
