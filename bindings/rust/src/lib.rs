// SPDX-License-Identifier: MIT OR Apache-2.0
//! tenferro-gpu for Rust: drive one CUDA device's runtime (its primary
//! context, stream slots, cuBLAS, transfers, kernels) through
//! `libtenferro_gpu.so.1`.
//!
//! ```no_run
//! use tenferro_gpu::Runtime;
//!
//! if tenferro_gpu::gpu_available() {
//!     let rt = Runtime::new(0)?;
//!     let stream = rt.stream(0)?;                   // slot 0, from any thread
//!     let (m, n, k) = (2, 2, 3);
//!     let a = stream.alloc_from(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?; // row-major 2x3
//!     let b = stream.alloc_from(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0])?; // row-major 3x2
//!     let mut c = stream.alloc::<f32>(m * n)?;
//!     stream.matmul(&a, &b, &mut c, m, n, k)?;      // the library's cuBLAS
//!     assert_eq!(stream.to_vec(&c)?, vec![4.0, 5.0, 10.0, 11.0]);
//!     assert_eq!(stream.to_vec(&c.slice(2..))?, vec![10.0, 11.0]);
//!     let raw = stream.cu_stream()?;                 // the CUstream, for other libraries
//!     stream.with_context(|| {
//!         // the primary context is current here: call any CUDA library
//!     })?;
//!     stream.sync()?;
//! }
//! # Ok::<(), tenferro_gpu::Error>(())
//! ```
//!
//! [`Stream`] is the handle to reach for: one stream slot of a runtime,
//! whichever OS thread (or async task, once resumed elsewhere) uses it.
//! Device memory is typed: [`DeviceBuffer<T>`] owns an allocation and is
//! freed on its stream, [`DeviceSlice`] and [`DeviceSliceMut`] borrow a range
//! of one; `T` is a plain number ([`DeviceRepr`]).
//!
//! Every fallible call returns [`Result`]; an [`Error`] carries the
//! library's record (status, operation, call, code, code domain, message),
//! read on the failing thread right after the call.
//!
//! The library is opened at run time by default (feature
//! `dynamic-loading`): a program using this crate starts where
//! `libtenferro_gpu.so.1` is not installed, [`gpu_available`] is then false
//! and every call returns [`Status::LibraryNotFound`] ([`load`] says why).
//! The feature `linked` links it at build time instead.  [`sys`] (the crate
//! `tenferro-gpu-sys`) has the raw declarations of the whole header.
//!
//! # Threads and async tasks
//!
//! | type | `Send` | `Sync` | why |
//! | --- | --- | --- | --- |
//! | [`Runtime`], [`Stream`] | yes | yes | the C library lets any thread use a (bound) handle and serializes what it must |
//! | [`DeviceBuffer<T>`] | yes | yes | freed on its own stream from any thread; `&` only reads |
//! | [`DeviceSlice`], [`DeviceSliceMut`] | yes | yes | as `&[T]` and `&mut [T]` |
//! | [`Event`], [`Module`], [`Function`], [`Program`], [`Graph`] | yes | yes | thread-safe in C; released in `Drop` only |
//! | [`HostBuffer<T>`] | yes | yes | as `Box<[T]>`; the pool's free is thread-safe |
//! | [`Registered<T>`] | yes | yes | as `Vec<T>`, which it owns |
//! | [`RegisteredSlice<'a, T>`] | yes | yes | as `&'a mut [T]` |
//! | [`Transfer<'d, H>`] | if `H` is | if `H` is | owns `H` and an [`Event`] |
//! | [`Error`], [`RegisterError<T>`], [`UnregisterError<T>`], [`MemoryStats`], [`Updated`] | yes | yes | plain data, and what it hands back |
//!
//! A future that holds a [`Stream`] (and buffers) is `Send`, so an executor
//! may move it between worker threads; each call is synchronous and made
//! through the stream, so the work stays on that stream and the error
//! record is read before the task can move.  Futures that call a plain
//! [`Runtime`] would switch slots with the thread.  This crate has no async
//! API of its own (and needs no executor): a call blocks as the C function
//! does.  See docs/rust.md.
//!
//! # Lifetimes
//!
//! Whatever safe code does, `std::mem::forget` included, the device never
//! writes host memory that Rust may free or reuse: page-locked memory goes
//! to the asynchronous copies by value ([`HostBuffer`], a [`Registered`]
//! `Vec`, a [`RegisteredSlice`] that cannot leave its
//! [`Runtime::with_host_registered`] scope), and each owner lets go of it
//! only once no stream can still use it, or leaks it; a graph capture
//! never takes such memory ([`Stream::capture`]).  Device memory is freed
//! in order on its buffer's own stream, after the work this crate queued
//! with it on other slots, whose uses it records; work you queue yourself
//! on another slot must be recorded ([`DeviceBuffer::record_use`]) or
//! finished (or ordered with an [`Event`]) before the buffer goes, which
//! the types do not check.  docs/rust.md, "Lifetime rules", says what each
//! type keeps alive and what a failed call leaves.
//!
//! # Graphs and the memory pool (1.2)
//!
//! [`Stream::capture`] turns the work a closure queues into a [`Graph`]
//! that [`Graph::launch`] runs again with one launch; the capture ends
//! before `capture` returns, also when the closure fails or panics, so no
//! guard can be forgotten with the slot still capturing.
//! [`Runtime::memory_stats`], [`Runtime::reset_peak_memory_stats`] and
//! [`Runtime::trim_memory`] watch and trim the device's memory pool.
//!
//! License: MIT OR Apache-2.0 (LICENSE, LICENSE-MIT and LICENSE-APACHE at
//! the top of the repository).

pub use tenferro_gpu_sys as sys;

pub mod cublas;

mod async_copy;
mod callback;
mod capture_gate;
mod device;
mod error;
mod graph;
mod host;
mod kernels;
mod library;
mod log;
mod memory;
mod memory_pool;
mod pending_copies;
mod recorded_use;
mod registration;
mod retirement;
mod runtime;
mod stream;
mod stream_work;
mod transfer;

use std::ffi::CStr;

pub use callback::CALLBACK_PANICKED;
pub use device::{device_count, device_info, devices, gpu_available, DeviceProperties};
pub use error::{clear_last_error, last_error, status_string, CodeDomain, Error, Result, Status};
pub use async_copy::{PinnedMemory, Transfer};
pub use graph::{Graph, Updated};
pub use host::{HostBuffer, HostPoolStats};
pub use registration::{RegisterError, Registered, RegisteredSlice, UnregisterError};
pub use kernels::{CompileOptions, CompileTarget, Function, KernelArg, LaunchConfig, Module, Program};
pub use library::load;
pub use log::{reset_log_callback, set_log_callback, LogLevel};
pub use memory::{AsDeviceSlice, AsDeviceSliceMut, DeviceBuffer, DeviceRepr, DeviceSlice, DeviceSliceMut};
pub use memory_pool::MemoryStats;
pub use recorded_use::DeviceUse;
pub use runtime::{Capability, Runtime, RuntimeOptions};
pub use stream::Stream;
pub use retirement::RetirementStats;
pub use stream_work::{Event, PointerMode};

/// Version of the loaded library as (major, minor, patch).  Errors:
/// LibraryNotFound without libtenferro_gpu.so.1.
pub fn version() -> Result<(u32, u32, u32)> {
    let lib = library::api()?;
    // SAFETY: no arguments.
    let n = unsafe { lib.tf_version() };
    Ok((n / 10000, n / 100 % 100, n % 100))
}

/// Version of the loaded library as "major.minor.patch".  Errors:
/// LibraryNotFound without libtenferro_gpu.so.1.
pub fn version_string() -> Result<&'static str> {
    let lib = library::api()?;
    // SAFETY: the library returns a static, NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(lib.tf_version_string()) }.to_str().unwrap_or(""))
}
