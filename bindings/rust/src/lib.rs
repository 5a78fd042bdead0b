//! tenferro-gpu for Rust: drive one CUDA device's runtime (its primary
//! context, per-thread stream slots) through `libtenferro_gpu.so.1`.
//!
//! ```no_run
//! use tenferro_gpu::Runtime;
//!
//! if tenferro_gpu::gpu_available() {
//!     let rt = Runtime::new(0)?;
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

pub mod sys;

mod callback;
mod device;
mod error;
mod log;
mod runtime;

use std::ffi::CStr;

pub use callback::CALLBACK_PANICKED;
pub use device::{device_count, device_info, devices, gpu_available, DeviceProperties};
pub use error::{clear_last_error, last_error, status_string, CodeDomain, Error, Result, Status};
pub use log::{reset_log_callback, set_log_callback, LogLevel};
pub use runtime::{Capability, Runtime, RuntimeOptions};

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
