// SPDX-License-Identifier: MIT OR Apache-2.0
//! The library's own cuBLAS: its functions by name (`tf_cublas_symbol`),
//! its version, and GEMM on [`DeviceBuffer`](crate::DeviceBuffer)s and their views with cublasSgemm_v2 /
//! cublasDgemm_v2 resolved that way, so this crate needs no cuBLAS of its
//! own and its products are ordered with everything else on the slot.

use std::ffi::CString;
use std::os::raw::c_void;
use std::sync::OnceLock;

use crate::error::{out_param, Error, Result};
use crate::library::api;
use crate::memory::{AsDeviceSlice, AsDeviceSliceMut, DeviceRepr};
use crate::runtime::Runtime;
use crate::stream_work::PointerMode;

/// Address of the cuBLAS function `name` ("cublasSgemm_v2") of the cuBLAS
/// the library loaded; cast it to the function's type.  Errors:
/// InvalidArgument (a name not starting with "cublas"), LibraryNotFound,
/// NotSupported (no such symbol).
pub fn symbol(name: &str) -> Result<*mut c_void> {
    let c = CString::new(name)
        .map_err(|_| Error::invalid_argument("cublas::symbol", "the name contains a NUL byte"))?;
    let lib = api()?;
    // SAFETY: a NUL-terminated name and a valid out pointer.
    out_param(|out| unsafe { lib.tf_cublas_symbol(c.as_ptr(), out) })
}

/// Version of the library's cuBLAS as (major, minor, patch).
pub fn version() -> Result<(u32, u32, u32)> {
    let lib = api()?;
    // SAFETY: a valid out pointer.
    let n = out_param(|out| unsafe { lib.tf_cublas_version(out) })? as u32;
    Ok((n / 10000, n / 100 % 100, n % 100))
}

/// `cublasOperation_t` of a GEMM operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// As stored.
    N,
    /// Transposed.
    T,
}

type GemmFn<T> = unsafe extern "C" fn(
    *mut c_void,
    i32,
    i32,
    i32,
    i32,
    i32,
    *const T,
    *const T,
    i32,
    *const T,
    i32,
    *const T,
    *mut T,
    i32,
) -> i32;

/// Element types cuBLAS multiplies: f32 (cublasSgemm_v2), f64 (cublasDgemm_v2).
pub trait GemmScalar: DeviceRepr {
    #[doc(hidden)]
    fn gemm_fn() -> Result<GemmFn<Self>>;
}

fn resolve<T>(cache: &'static OnceLock<usize>, name: &str) -> Result<GemmFn<T>> {
    let address = match cache.get() {
        Some(&a) => a,
        None => {
            // Racing first callers resolve the same address; a failure is
            // not cached, so a later call tries again.
            let a = symbol(name)? as usize;
            let _ = cache.set(a);
            a
        }
    };
    // SAFETY: the symbol is the cuBLAS function of this type.
    Ok(unsafe { std::mem::transmute::<usize, GemmFn<T>>(address) })
}

impl GemmScalar for f32 {
    fn gemm_fn() -> Result<GemmFn<f32>> {
        static CACHE: OnceLock<usize> = OnceLock::new();
        resolve(&CACHE, "cublasSgemm_v2")
    }
}

impl GemmScalar for f64 {
    fn gemm_fn() -> Result<GemmFn<f64>> {
        static CACHE: OnceLock<usize> = OnceLock::new();
        resolve(&CACHE, "cublasDgemm_v2")
    }
}

/// A column-major GEMM's shape: C (m x n) = alpha op(A) op(B) + beta C,
/// op(A) m x k, op(B) k x n; leading dimensions default to the stored rows.
#[derive(Clone, Copy, Debug)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub trans_a: Op,
    pub trans_b: Op,
    pub lda: Option<usize>,
    pub ldb: Option<usize>,
    pub ldc: Option<usize>,
}

impl Gemm {
    /// No transposes, tight leading dimensions.
    pub fn new(m: usize, n: usize, k: usize) -> Gemm {
        Gemm { m, n, k, trans_a: Op::N, trans_b: Op::N, lda: None, ldb: None, ldc: None }
    }
    pub fn trans(mut self, a: Op, b: Op) -> Gemm {
        (self.trans_a, self.trans_b) = (a, b);
        self
    }
    pub fn leading(mut self, lda: usize, ldb: usize, ldc: usize) -> Gemm {
        (self.lda, self.ldb, self.ldc) = (Some(lda), Some(ldb), Some(ldc));
        self
    }
}

fn int(value: usize, what: &str) -> Result<i32> {
    i32::try_from(value)
        .map_err(|_| Error::invalid_argument("Runtime::gemm", &format!("{what}={value} is over i32")))
}

/// Checks a rows x cols column-major operand with leading dimension ld
/// fits `len` values; returns ld as the int cuBLAS takes.
fn operand(rows: usize, cols: usize, ld: usize, len: usize, what: &str) -> Result<i32> {
    if ld < rows.max(1) {
        return Err(Error::invalid_argument(
            "Runtime::gemm",
            &format!("{what}: leading dimension {ld} is below its {rows} rows"),
        ));
    }
    let need = if rows == 0 || cols == 0 {
        Some(0)
    } else {
        (cols - 1).checked_mul(ld).and_then(|n| n.checked_add(rows))
    };
    let Some(need) = need else {
        return Err(Error::invalid_argument(
            "Runtime::gemm",
            &format!("{what}: a {rows}x{cols} matrix with leading dimension {ld} spans more than usize::MAX values"),
        ));
    };
    if need > len {
        return Err(Error::invalid_argument(
            "Runtime::gemm",
            &format!("{what}: a {rows}x{cols} matrix with leading dimension {ld} needs {need} values; the buffer has {len}"),
        ));
    }
    int(ld, what)
}

fn op(o: Op) -> i32 {
    match o {
        Op::N => 0,
        Op::T => 1,
    }
}

impl Runtime {
    /// C = alpha op(A) op(B) + beta C in cuBLAS's column-major layout, on
    /// this handle's slot (the calling thread's; use [`crate::Stream::gemm`]
    /// for a fixed one), with the library's cuBLAS.  The operands (buffers
    /// or views) are checked against the shape before anything is queued
    /// (InvalidArgument); a cuBLAS failure is Provider with the status.
    pub fn gemm<T: GemmScalar>(
        &self,
        shape: &Gemm,
        alpha: T,
        a: &impl AsDeviceSlice<T>,
        b: &impl AsDeviceSlice<T>,
        beta: T,
        c: &mut impl AsDeviceSliceMut<T>,
    ) -> Result<()> {
        let (a, b, c) = (a.as_device_slice(), b.as_device_slice(), c.as_device_slice_mut());
        let Gemm { m, n, k, .. } = *shape;
        let (ar, ac) = if shape.trans_a == Op::T { (k, m) } else { (m, k) };
        let (br, bc) = if shape.trans_b == Op::T { (n, k) } else { (k, n) };
        let lda = operand(ar, ac, shape.lda.unwrap_or(ar.max(1)), a.len(), "a")?;
        let ldb = operand(br, bc, shape.ldb.unwrap_or(br.max(1)), b.len(), "b")?;
        let ldc = operand(m, n, shape.ldc.unwrap_or(m.max(1)), c.len(), "c")?;
        let (m, n, k) = (int(m, "m")?, int(n, "n")?, int(k, "k")?);
        let f = T::gemm_fn()?;
        let (pa, pb, pc) = (a.as_raw() as *const T, b.as_raw() as *const T, c.as_raw() as *mut T);
        let (ta, tb) = (op(shape.trans_a), op(shape.trans_b));
        self.cublas_enqueue(PointerMode::Host, |handle, _stream| {
            // SAFETY: the operands were checked to fit their buffers, and
            // alpha and beta are host values, as the pointer mode says.
            unsafe { f(handle, ta, tb, m, n, k, &alpha, pa, lda, pb, ldb, &beta, pc, ldc) }
        })?;
        self.record_uses([a.device_use(), b.device_use(), c.device_use()])
    }

    /// C = A B for row-major (C-order) matrices, A m x k, B k x n, C m x n,
    /// as NumPy and PyTorch lay them out: the column-major product
    /// C^T = B^T A^T, i.e. [`Runtime::gemm`] with the operands swapped.
    pub fn matmul<T: GemmScalar + From<u8>>(
        &self,
        a: &impl AsDeviceSlice<T>,
        b: &impl AsDeviceSlice<T>,
        c: &mut impl AsDeviceSliceMut<T>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        let shape = Gemm::new(n, m, k).leading(n.max(1), k.max(1), n.max(1));
        self.gemm(&shape, T::from(1), b, a, T::from(0), c)
    }
}
