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
are checked against the shapes before anything is queued) or device
addresses as integers (torch.Tensor.data_ptr(), not checked).
"""

import ctypes
from ctypes import c_int, c_uint64, c_void_p

from .memory import DeviceBuffer
from .stream_work import PointerMode, cublas_function

# cublasOperation_t
OP_N, OP_T = 0, 1

_TYPES = {"float32": ("cublasSgemm_v2", ctypes.c_float),
          "float64": ("cublasDgemm_v2", ctypes.c_double)}
_functions = {}


def _dtype_name(dtype):
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype)
    name = str(name).rsplit(".", 1)[-1]
    name = {"float": "float32", "single": "float32", "double": "float64"}.get(name, name)
    if name not in _TYPES:
        raise TypeError(f"gemm supports float32 and float64, not {dtype!r}")
    return name


def _gemm_function(name):
    """The library's cublas<S|D>gemm_v2, resolved once per process."""
    fn = _functions.get(name)
    if fn is None:
        symbol, scalar = _TYPES[name]
        ptr = ctypes.POINTER(scalar)
        fn = cublas_function(symbol, c_int, c_void_p, c_int, c_int, c_int, c_int, c_int,
                             ptr, c_uint64, c_int, c_uint64, c_int, ptr, c_uint64, c_int)
        _functions[name] = fn
    return fn


def _int(value, name):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer")
    value = value.__index__()
    if not 0 <= value < (1 << 31):
        raise ValueError(f"{name}={value} is outside 0 .. 2**31 - 1")
    return value


def _operand(buffer, rows, cols, ld, itemsize, name):
    """The address of a column-major rows x cols operand with leading
    dimension ld, checking ld and a DeviceBuffer's size."""
    if ld < max(rows, 1):
        raise ValueError(f"{name}: leading dimension {ld} is below its {rows} rows")
    if isinstance(buffer, DeviceBuffer):
        need = ((cols - 1) * ld + rows) * itemsize if rows and cols else 0
        if need > buffer.nbytes:
            raise ValueError(f"{name}: a {rows}x{cols} matrix with leading dimension {ld} "
                             f"needs {need} bytes; the DeviceBuffer has {buffer.nbytes}")
        return buffer.ptr
    if isinstance(buffer, bool) or not hasattr(buffer, "__index__"):
        raise TypeError(f"{name} must be a DeviceBuffer or a device address")
    return buffer.__index__()


def gemm(rt, a, b, c, m, n, k, *, dtype="float32", transa=False, transb=False,
         alpha=1.0, beta=0.0, lda=None, ldb=None, ldc=None):
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
    pa = _operand(a, a_rows, a_cols, lda, size, "a")
    pb = _operand(b, b_rows, b_cols, ldb, size, "b")
    pc = _operand(c, m, n, ldc, size, "c")
    fn = _gemm_function(name)
    al, be = scalar(alpha), scalar(beta)
    ops = (OP_T if transa else OP_N, OP_T if transb else OP_N)

    def run(handle, stream):
        return fn(handle, ops[0], ops[1], m, n, k, ctypes.byref(al), pa, lda,
                  pb, ldb, ctypes.byref(be), pc, ldc)
    rt.cublas_enqueue(run, pointer_mode=PointerMode.HOST)


def sgemm(rt, a, b, c, m, n, k, **options):
    """gemm() in float32 (cublasSgemm_v2)."""
    gemm(rt, a, b, c, m, n, k, dtype="float32", **options)


def dgemm(rt, a, b, c, m, n, k, **options):
    """gemm() in float64 (cublasDgemm_v2)."""
    gemm(rt, a, b, c, m, n, k, dtype="float64", **options)


def matmul(rt, a, b, c, m, n, k, *, dtype="float32", alpha=1.0, beta=0.0):
    """C = alpha * A @ B + beta * C for C-contiguous (row-major) matrices:
    A is m x k, B is k x n, C is m x n, as numpy.matmul and torch.matmul
    lay them out.  Row-major C is column-major C^T = B^T A^T, so this is
    gemm(n, m, k) with the operands swapped."""
    gemm(rt, b, a, c, n, m, k, dtype=dtype, alpha=alpha, beta=beta,
         lda=max(n, 1), ldb=max(k, 1), ldc=max(n, 1))
