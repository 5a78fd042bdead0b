# SPDX-License-Identifier: MIT OR Apache-2.0
"""tenferro_gpu.blas: SGEMM and DGEMM through the library's own cuBLAS,
against NumPy.  The same checks run against the cuBLAS double and on a GPU."""

import pytest

import tenferro_gpu as tg
import support

np = pytest.importorskip("numpy")

SHAPES = [(1, 1, 1), (3, 4, 5), (17, 9, 33), (64, 128, 32), (127, 65, 200)]
TOLERANCE = {np.float32: 1e-4, np.float64: 1e-12}


def _device(rt, host):
    buf = rt.alloc(host.nbytes)
    buf.upload(host)
    return buf


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matmul_equals_numpy(rt, dtype, m, n, k):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    with _device(rt, a) as da, _device(rt, b) as db, _device(rt, c0) as dc:
        tg.blas.matmul(rt, da, db, dc, m, n, k, dtype=dtype, alpha=2.0, beta=0.5)
        got = dc.download(np.empty((m, n), dtype))
    want = 2.0 * (a.astype(np.float64) @ b) + 0.5 * c0
    np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype] * k)


@pytest.mark.parametrize("transa,transb", [(False, False), (True, False), (False, True), (True, True)])
def test_column_major_gemm_with_transposes_and_leading_dimensions(rt, transa, transb):
    m, n, k, pad = 5, 7, 3, 2
    rng = np.random.default_rng(7)
    # column-major storage: a Fortran array's bytes, leading dimension padded
    a_rows, a_cols = (k, m) if transa else (m, k)
    b_rows, b_cols = (n, k) if transb else (k, n)
    a = np.asfortranarray(rng.standard_normal((a_rows + pad, a_cols)))
    b = np.asfortranarray(rng.standard_normal((b_rows, b_cols)))
    with _device(rt, a) as da, _device(rt, b) as db, rt.alloc(m * n * 8) as dc:
        tg.blas.dgemm(rt, da, db, dc, m, n, k, transa=transa, transb=transb,
                      lda=a_rows + pad)
        got = dc.download(np.empty((n, m))).T
    opa = a[:a_rows].T if transa else a[:a_rows]
    opb = b.T if transb else b
    np.testing.assert_allclose(got, opa @ opb, rtol=1e-12)


def test_sizes_are_checked_before_cublas_is_called(rt):
    with rt.alloc(4 * 6) as small, rt.alloc(4 * 100) as big:
        calls = support.DOUBLE.call_count("cublasSgemm_v2") if support.DOUBLE else 0
        with pytest.raises(ValueError, match="needs 36 bytes"):
            tg.blas.matmul(rt, small, big, big, 3, 3, 3)
        with pytest.raises(ValueError, match="leading dimension 1"):
            tg.blas.sgemm(rt, big, big, big, 2, 2, 2, lda=1)
        with pytest.raises(TypeError, match="float32 and float64"):
            tg.blas.gemm(rt, big, big, big, 1, 1, 1, dtype="int8")
        with pytest.raises(TypeError, match="DeviceBuffer or a device address"):
            tg.blas.sgemm(rt, 1.5, big, big, 1, 1, 1)
        if support.DOUBLE:
            assert support.DOUBLE.call_count("cublasSgemm_v2") == calls


def test_double_a_refused_gemm_raises_provider_error(double, rt):
    with rt.alloc(64) as buf:
        double.inject("cublasSgemm_v2", 1, 13)     # CUBLAS_STATUS_EXECUTION_FAILED
        with pytest.raises(tg.ProviderError) as e:
            tg.blas.sgemm(rt, buf, buf, buf, 2, 2, 2)
        assert (e.value.code, e.value.code_domain) == (13, tg.CodeDomain.CUBLAS)
