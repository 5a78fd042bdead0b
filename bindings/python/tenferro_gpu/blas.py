# SPDX-License-Identifier: MIT OR Apache-2.0
"""Matrix products with the library's own cuBLAS: cublasSgemm_v2 and
cublasDgemm_v2 resolved through tf_cublas_symbol and run through
Runtime.cublas_enqueue on the calling thread's slot, so this package needs
no cuBLAS of its own and its products are ordered with everything else on
the slot.

    a, b, c = rt.alloc(m * k * 4), rt.alloc(k * n * 4), rt.alloc(m * n * 4)
    a.upload(A)  ;  b.upload(B)                  # float32, row-major
    tenferro_gpu.blas.matmul(rt, a, b, c, m, n, k)
    C = c.download(numpy.empty((m, n), numpy.float32))   # == A @ B

gemm() is cuBLAS's own column-major GEMM; matmul() is the row-major
product NumPy and PyTorch compute.  Operands are DeviceBuffers (whose sizes
are checked against the shapes before anything is queued), other
libraries' device arrays (a torch.Tensor, a cupy.ndarray: their sizes are
checked too, and they are ordered and kept as _foreign.py says), or device
addresses as integers (torch.Tensor.data_ptr(), not checked).
"""

from __future__ import annotations

import ctypes
from ctypes import c_int, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from . import _capi, _foreign
from . import pool as _pool
from .buffer import DeviceBuffer
from .stream_work import PointerMode, cublas_function, cublas_symbol

if TYPE_CHECKING:
    from .runtime import Runtime

# cublasOperation_t
OP_N, OP_T = 0, 1

_TYPES = {"float32": ("cublasSgemm_v2", ctypes.c_float),
          "float64": ("cublasDgemm_v2", ctypes.c_double)}
_functions: Dict[str, Any] = {}
_addresses: Dict[str, int] = {}


def _dtype_name(dtype: object) -> str:
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype)
    name = str(name).rsplit(".", 1)[-1]
    name = {"float": "float32", "single": "float32", "double": "float64"}.get(name, name)
    if name not in _TYPES:
        raise TypeError(f"gemm supports float32 and float64, not {dtype!r}")
    return name


def _gemm_function(name: str) -> Any:
    """The library's cublas<S|D>gemm_v2, resolved once per process."""
    fn = _functions.get(name)
    if fn is None:
        symbol, scalar = _TYPES[name]
        ptr = ctypes.POINTER(scalar)
        fn = cublas_function(symbol, c_int, c_void_p, c_int, c_int, c_int, c_int, c_int,
                             ptr, c_uint64, c_int, c_uint64, c_int, ptr, c_uint64, c_int)
        _functions[name] = fn
    return fn


def _gemm_address(name: str) -> int:
    """The address of the library's cublas<S|D>gemm_v2, resolved once."""
    found = _addresses.get(name)
    if found is None:
        found = _addresses[name] = int(cublas_symbol(_TYPES[name][0]))
    return found


def _int(value: object, name: str) -> int:
    index = getattr(value, "__index__", None)
    if isinstance(value, bool) or index is None:
        raise TypeError(f"{name} must be an integer")
    number: int = index()
    if not 0 <= number < (1 << 31):
        raise ValueError(f"{name}={number} is outside 0 .. 2**31 - 1")
    return number


def _operand(rt: "Runtime", buffer: Any, rows: int, cols: int, ld: int, itemsize: int,
             name: str, borrowed: List[_foreign.Foreign]) -> int:
    """The address of a column-major rows x cols operand with leading
    dimension ld, checking ld and the size of a DeviceBuffer or another
    library's array (appended to `borrowed`)."""
    if ld < max(rows, 1):
        raise ValueError(f"{name}: leading dimension {ld} is below its {rows} rows")
    need = ((cols - 1) * ld + rows) * itemsize if rows and cols else 0
    if isinstance(buffer, DeviceBuffer):
        buffer._check_contiguous(f"gemm operand {name}")
        if need > buffer.nbytes:
            raise ValueError(f"{name}: a {rows}x{cols} matrix with leading dimension {ld} "
                             f"needs {need} bytes; the DeviceBuffer has {buffer.nbytes}")
        return buffer.ptr
    if _foreign.has_protocol(buffer):
        foreign = _foreign.borrow(rt, buffer, writable=name == "c")
        borrowed.append(foreign)
        if need > foreign.nbytes:
            raise ValueError(f"{name}: a {rows}x{cols} matrix with leading dimension {ld} "
                             f"needs {need} bytes; the {type(buffer).__name__} has "
                             f"{foreign.nbytes}")
        return foreign.address
    index = getattr(buffer, "__index__", None)
    if isinstance(buffer, bool) or index is None:
        raise TypeError(f"{name} must be a DeviceBuffer or a device address (or "
                        f"another library's device array)")
    address: int = index()
    return address


def gemm(rt: "Runtime", a: Any, b: Any, c: Any, m: int, n: int, k: int, *,
         dtype: object = "float32", transa: bool = False, transb: bool = False,
         alpha: float = 1.0, beta: float = 0.0, lda: Optional[int] = None,
         ldb: Optional[int] = None, ldc: Optional[int] = None) -> None:
    """C = alpha * op(A) @ op(B) + beta * C in cuBLAS's column-major layout:
    op(A) is m x k, op(B) is k x n, C is m x n; op transposes when transa /
    transb is true.  Leading dimensions default to the stored rows.  Queued
    on the calling thread's slot of `rt`; raises ProviderError when cuBLAS
    refuses (code: the cublasStatus_t)."""
    name = _dtype_name(dtype)
    m, n, k = _int(m, "m"), _int(n, "n"), _int(k, "k")
    a_rows, a_cols = (k, m) if transa else (m, k)
    b_rows, b_cols = (n, k) if transb else (k, n)
    lda = _int(a_rows if lda is None else lda, "lda") or 1
    ldb = _int(b_rows if ldb is None else ldb, "ldb") or 1
    ldc = _int(m if ldc is None else ldc, "ldc") or 1
    scalar = _TYPES[name][1]
    size = ctypes.sizeof(scalar)
    borrowed: List[_foreign.Foreign] = []
    try:
        pa = _operand(rt, a, a_rows, a_cols, lda, size, "a", borrowed)
        pb = _operand(rt, b, b_rows, b_cols, ldb, size, "b", borrowed)
        pc = _operand(rt, c, m, n, ldc, size, "c", borrowed)
        ops = (OP_T if transa else OP_N, OP_T if transb else OP_N)
        sp = _capi.speedups
        if sp is not None:      # the enqueue and its callback in C
            st = sp.gemm(rt._active(), _gemm_address(name), name == "float64", ops[0],
                         ops[1], m, n, k, float(alpha), pa, lda, pb, ldb, float(beta),
                         pc, ldc)
            if st:
                rt._target()._fail(st)
        else:
            fn = _gemm_function(name)
            al, be = scalar(alpha), scalar(beta)

            def run(handle: int, stream: int) -> int:
                return int(fn(handle, ops[0], ops[1], m, n, k, ctypes.byref(al), pa, lda,
                              pb, ldb, ctypes.byref(be), pc, ldc))
            rt.cublas_enqueue(run, pointer_mode=PointerMode.HOST)
        _pool.record_uses(rt, a, b, c)
    finally:
        _foreign.finish(rt, borrowed, queued=True)


def sgemm(rt: "Runtime", a: Any, b: Any, c: Any, m: int, n: int, k: int,
          **options: Any) -> None:
    """gemm() in float32 (cublasSgemm_v2)."""
    gemm(rt, a, b, c, m, n, k, dtype="float32", **options)


def dgemm(rt: "Runtime", a: Any, b: Any, c: Any, m: int, n: int, k: int,
          **options: Any) -> None:
    """gemm() in float64 (cublasDgemm_v2)."""
    gemm(rt, a, b, c, m, n, k, dtype="float64", **options)


def matmul(rt: "Runtime", a: Any, b: Any, c: Any, m: int, n: int, k: int, *,
           dtype: object = "float32", alpha: float = 1.0, beta: float = 0.0) -> None:
    """C = alpha * A @ B + beta * C for C-contiguous (row-major) matrices:
    A is m x k, B is k x n, C is m x n, as numpy.matmul and torch.matmul
    lay them out.  Row-major C is column-major C^T = B^T A^T, so this is
    gemm(n, m, k) with the operands swapped."""
    gemm(rt, b, a, c, n, m, k, dtype=dtype, alpha=alpha, beta=beta,
         lda=max(n, 1), ldb=max(k, 1), ldc=max(n, 1))
