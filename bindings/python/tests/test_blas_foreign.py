# SPDX-License-Identifier: MIT OR Apache-2.0
"""blas on other libraries' arrays of a torch.Tensor's kind (DLPack,
versioned, CUDA memory, float32/64, C order): the product, the tensors
kept until the device has passed the call (one retirement for all of a
call's operands), and every other kind still refused with its message."""

import pytest

import tenferro_gpu as tg
import support

np = pytest.importorskip("numpy")


def _operands(rt, m, n, k, dtype=np.float32):
    rng = np.random.default_rng(7)
    hosts = [rng.standard_normal(s).astype(dtype) for s in ((m, k), (k, n), (m, n))]
    bufs = [rt.to_device(h) for h in hosts]
    bits = np.dtype(dtype).itemsize * 8
    tensors = [support.TensorLike(b, h.shape, bits=bits) for b, h in zip(bufs, hosts)]
    return hosts, bufs, tensors


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_on_tensors_equals_numpy(rt, dtype):
    (a, b, _), bufs, tensors = _operands(rt, 5, 3, 4, dtype)
    tg.blas.matmul(rt, *tensors, 5, 3, 4, dtype=dtype)
    out = bufs[2].download(np.empty((5, 3), dtype))
    assert np.allclose(out, a @ b)
    rt.sync()
    assert [t.deleted for t in tensors] == [1, 1, 1]


def test_double_the_tensors_are_kept_until_the_device_passed_the_call(double, rt):
    _, _, tensors = _operands(rt, 2, 2, 2)
    before = rt.retirement_stats().deferred
    double.set_async_pending(1)
    rt.stream()
    tg.blas.matmul(rt, *tensors, 2, 2, 2)
    rt.poll_retirements()
    assert [t.deleted for t in tensors] == [0, 0, 0]
    assert rt.retirement_stats().deferred == before + 1        # one for the three
    rt.sync()
    assert [t.deleted for t in tensors] == [1, 1, 1]


def test_a_refused_size_deletes_what_was_taken(rt):
    _, _, tensors = _operands(rt, 2, 2, 2)
    with pytest.raises(ValueError, match="needs 32 bytes; the TensorLike has 16"):
        tg.blas.matmul(rt, tensors[0], tensors[1], tensors[2], 4, 4, 2)
    rt.sync()
    # matmul is gemm with B first: B was taken (and is deleted), A and C not.
    assert [t.deleted for t in tensors] == [0, 1, 0]
    assert [t.requests for t in tensors] == [0, 1, 0]


def test_other_kinds_are_read_by_the_python_path_with_its_messages(rt):
    buf = rt.alloc(64)
    strided = support.TensorLike(buf, (2, 2), strides=(1, 2))
    with pytest.raises(BufferError, match="not contiguous"):
        tg.blas.matmul(rt, strided, buf, buf, 2, 2, 2)
    read_only = support.TensorLike(buf, (2, 2), read_only=True)
    with pytest.raises(TypeError, match="read-only"):
        tg.blas.matmul(rt, buf, buf, read_only, 2, 2, 2)
    ints = support.TensorLike(buf, (4,), code=0)              # int32: taken by Python
    with pytest.raises(ValueError, match="needs"):
        tg.blas.matmul(rt, ints, buf, buf, 4, 4, 4)
    rt.sync()
    assert strided.deleted == read_only.deleted == 0   # refused before being taken
    assert ints.deleted == 1


def test_the_extension_takes_the_common_kind_and_leaves_the_rest(rt):
    from tenferro_gpu import _capi, _dlpack
    sp = _capi.speedups
    if sp is None:
        pytest.skip("the ctypes path reads every capsule in Python")
    buf = rt.alloc(64)
    capsule = support.TensorLike(buf, (4, 2)).__dlpack__()
    start, nbytes, managed, versioned = sp.take_dlpack(capsule, True)
    assert (start, nbytes, versioned) == (buf.ptr, 32, True)
    assert _dlpack.capsule_name(capsule) == _dlpack.USED_VERSIONED
    for other in (support.TensorLike(buf, (2, 2), strides=(1, 2)),
                  support.TensorLike(buf, (2, 2), bits=16),
                  support.TensorLike(buf, (2, 2), read_only=True)):
        capsule = other.__dlpack__()
        assert sp.take_dlpack(capsule, True) is None
        assert _dlpack.capsule_name(capsule) == _dlpack.NAME_VERSIONED
    assert sp.take_dlpack(support.TensorLike(buf, (2,), read_only=True).__dlpack__(),
                          False)[1] == 8
