# SPDX-License-Identifier: MIT OR Apache-2.0
"""On a real GPU: DeviceBuffers go to PyTorch and CuPy without a copy
(torch.as_tensor, cupy.asarray through __cuda_array_interface__;
torch.from_dlpack, cupy.from_dlpack through __dlpack__), writes are seen
both ways, and the stream each protocol promises is honoured; tensors and
arrays of those libraries are taken wherever the binding takes device
memory.  Marked gpu: runs only with TF_TEST_MODE=gpu.

The ordering tests keep the producing stream busy first (spin), so that a
result is right only if the consumer's stream really waited on the device.
"""

import ctypes
import gc

import pytest

import tenferro_gpu as tg
import support
from test_gpu_interop import spin

pytestmark = pytest.mark.gpu
np = pytest.importorskip("numpy")

N = 1 << 20


def _host(shape=(3, 4)):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def test_torch_as_tensor_shares_the_memory(rt, torch_cuda):
    torch = torch_cuda
    host = _host()
    buf = rt.to_device(host)
    rt.sync()
    t = torch.as_tensor(buf, device="cuda")
    assert t.data_ptr() == buf.ptr and tuple(t.shape) == (3, 4) and t.dtype == torch.float32
    t.mul_(2)
    torch.cuda.synchronize()
    assert np.array_equal(buf.to_numpy(), 2 * host)            # torch's write, seen here
    buf.upload(np.zeros_like(host))
    rt.sync()
    assert t.abs().sum().item() == 0                            # ours, seen by torch
    view = buf[:, 1::2]
    tv = torch.as_tensor(view, device="cuda")
    assert tv.data_ptr() == view.ptr and tv.stride() == (4, 2)
    buf.upload(host)
    rt.sync()
    assert torch.equal(tv.cpu(), torch.from_numpy(host[:, 1::2].copy()))


def test_cupy_asarray_shares_the_memory(rt, cupy_cuda):
    cupy = cupy_cuda
    host = _host()
    buf = rt.to_device(host)
    a = cupy.asarray(buf)          # CuPy synchronizes with the exported stream
    assert a.data.ptr == buf.ptr and a.shape == (3, 4) and a.dtype == cupy.float32
    assert cupy.asnumpy(a).tolist() == host.tolist()
    a += 1
    cupy.cuda.get_current_stream().synchronize()
    assert np.array_equal(buf.to_numpy(), host + 1)
    view = cupy.asarray(buf[1:, ::3])
    assert view.data.ptr == buf[1:, ::3].ptr and view.strides == (16, 12)
    assert cupy.asnumpy(view).tolist() == (host + 1)[1:, ::3].tolist()


@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_from_dlpack_shares_the_memory_and_keeps_it(rt, library, request):
    mod = request.getfixturevalue(f"{library}_cuda")
    host = _host((4, 6))
    buf = rt.to_device(host)
    view = buf[1:3, ::2]
    whole = mod.from_dlpack(buf)
    part = mod.from_dlpack(view)
    ptr = whole.data_ptr() if library == "torch" else whole.data.ptr
    part_ptr = part.data_ptr() if library == "torch" else part.data.ptr
    assert ptr == buf.ptr and part_ptr == view.ptr
    del buf, view
    gc.collect()
    rt.sync()
    values = part.cpu().numpy() if library == "torch" else mod.asnumpy(part)
    assert values.tolist() == host[1:3, ::2].tolist()        # still our memory
    whole[0, 0] = 42
    got = whole.cpu().numpy() if library == "torch" else mod.asnumpy(whole)
    assert got[0, 0] == 42


@pytest.mark.parametrize("library", ["torch", "cupy"])
@pytest.mark.parametrize("protocol", ["dlpack", "interface"])
def test_a_with_block_leaves_the_memory_to_the_consumer(rt, library, protocol, request):
    # free() at the end of the block waits for the tensor (NOTE memory is
    # freed once): the memory is still ours, and the binding allocates
    # other memory meanwhile.
    mod = request.getfixturevalue(f"{library}_cuda")
    host = _host((64, 64))
    with rt.to_device(host) as buf:
        if protocol == "dlpack":
            t = mod.from_dlpack(buf)
        else:
            t = mod.as_tensor(buf, device="cuda") if library == "torch" else mod.asarray(buf)
    assert buf.freed
    others = [rt.to_device(np.full((64, 64), 9.0, np.float32)) for _ in range(8)]
    rt.sync()
    got = t.cpu().numpy() if library == "torch" else mod.asnumpy(t)
    assert np.array_equal(got, host)
    for other in others:
        other.free()
    del t
    gc.collect()
    rt.sync()


def test_from_dlpack_makes_torchs_stream_wait_for_the_slot(rt, torch_cuda):
    torch = torch_cuda
    stream = rt.bind_stream()
    buf = stream.empty(N, "float32")
    buf.upload(np.zeros(N, np.float32))
    stream.sync()
    busy = spin(torch, stream.torch_stream())                 # the slot stays busy
    stream.upload(np.full(N, 3.0, np.float32), buf)           # queued behind the spin
    t = torch.from_dlpack(buf)       # torch passes its current stream: it must wait
    assert not busy.query(), "the host waited: the ordering must be on the device"
    assert t.sum().item() == 3.0 * N


def test_a_torch_tensor_is_ordered_before_the_binding_reads_it(rt, torch_cuda):
    torch = torch_cuda
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    busy = spin(torch, torch.cuda.current_stream())
    x.fill_(7.0)                     # queued behind the spin on torch's stream
    out = np.empty(N, np.float32)
    rt.download(x, out)              # x.__dlpack__(stream=slot) makes the slot wait
    assert busy.query()
    assert (out == 7.0).all()


def test_cupy_arrays_through_dlpack_and_the_interface(rt, cupy_cuda):
    cupy = cupy_cuda
    a = cupy.ones((4096, 4096), dtype=cupy.float32)
    cupy.cuda.get_current_stream().synchronize()
    for _ in range(8):
        a = a @ a / 4096                 # busy for a while; stays all ones
    with rt.empty((4096, 4096), "float32") as buf:
        rt.copy(a, buf)                  # cupy's __dlpack__ orders the slot after it
        assert buf[4095, 4095].item() == 1.0
        b = cupy.zeros(16, dtype=cupy.float32)
        b += 5
        only_interface = support.CudaArray(b.data.ptr, (16,), "<f4",
                                           stream=cupy.cuda.get_current_stream().ptr or 1)
        assert rt.download_scalar(only_interface, "f", offset=60) == 5.0


def test_kernels_and_gemm_take_torch_tensors(rt, torch_cuda):
    torch = torch_cuda
    a = torch.rand(64, 32, device="cuda")
    b = torch.rand(32, 48, device="cuda")
    c = torch.empty(64, 48, device="cuda")
    tg.blas.matmul(rt, a, b, c, 64, 48, 32)
    rt.sync()
    assert torch.allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    x, y, out = torch.arange(256.0, device="cuda"), torch.ones(256, device="cuda"), \
        torch.empty(256, device="cuda")
    with rt.compile(support.ADD_SOURCE) as program, rt.load_module(program) as module:
        rt.launch(module.function("tfd_add_f32"), grid=1, block=256,
                  args=(x, y, out, ctypes.c_uint32(256)))
        rt.sync()
    assert torch.equal(out, x + 1)


def test_stream_helpers_wrap_the_slot_stream(rt, torch_cuda, cupy_cuda):
    stream = rt.bind_stream(0)
    assert stream.torch_stream().cuda_stream == stream.ptr
    assert stream.cupy_stream().ptr == stream.ptr
    with stream:
        assert rt.stream() == stream.ptr
