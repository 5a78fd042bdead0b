//! tenferro-gpu for Rust: drive one CUDA device's runtime (its primary
//! context, per-thread stream slots, cuBLAS, transfers, kernels) through
//! `libtenferro_gpu.so.1`.
//!
//! ```no_run
//! use tenferro_gpu::Runtime;
//!
//! if tenferro_gpu::gpu_available() {
//!     let rt = Runtime::new(0)?;
//!     let (m, n, k) = (2, 2, 3);
//!     let mut a = rt.alloc::<f32>(m * k)?;
//!     let mut b = rt.alloc::<f32>(k * n)?;
//!     let mut c = rt.alloc::<f32>(m * n)?;
//!     a.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;   // row-major 2x3
//!     b.upload(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0])?;   // row-major 3x2
//!     rt.matmul(&a, &b, &mut c, m, n, k)?;           // the library's cuBLAS
//!     assert_eq!(c.to_vec()?, vec![4.0, 5.0, 10.0, 11.0]);
//!     let stream = rt.stream()?;            // this thread's CUstream
//!     rt.with_context(|| {
//!         // the primary context is current here: call any CUDA library
//!     })?;
//!     rt.sync()?;
//! }
//! # Ok::<(), tenferro_gpu::Error>(())
//! ```
//!
//! Every fallible call returns [`Result`]; an [`Error`] carries the
//! library's record (status, operation, call, code, code domain, message),
//! read on the failing thread right after the call.  [`sys`] has the raw
//! declarations of the whole header.  See docs/rust.md.

pub mod cublas;
pub mod sys;

mod callback;
mod device;
mod error;
mod kernels;
mod log;
mod memory;
mod runtime;
mod stream_work;

use std::ffi::CStr;

pub use callback::CALLBACK_PANICKED;
pub use device::{device_count, device_info, devices, gpu_available, DeviceProperties};
pub use error::{clear_last_error, last_error, status_string, CodeDomain, Error, Result, Status};
pub use log::{reset_log_callback, set_log_callback, LogLevel};
pub use kernels::{CompileOptions, CompileTarget, Function, KernelArg, LaunchConfig, Module, Program};
pub use memory::{DeviceBuffer, Plain};
pub use runtime::{Capability, Runtime, RuntimeOptions};
pub use stream_work::{Event, PointerMode, RetirementStats};

/// Version of the loaded library as (major, minor, patch).
pub fn version() -> (u32, u32, u32) {
    // SAFETY: no arguments.
    let n = unsafe { sys::tf_version() };
    (n / 10000, n / 100 % 100, n % 100)
}

/// Version of the loaded library as "major.minor.patch".
pub fn version_string() -> &'static str {
    // SAFETY: the library returns a static, NUL-terminated string.
    unsafe { CStr::from_ptr(sys::tf_version_string()) }.to_str().unwrap_or("")
}
