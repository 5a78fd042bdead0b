// SPDX-License-Identifier: MIT OR Apache-2.0
//! Raw declarations of `libtenferro_gpu.so.1`: every constant, type,
//! `#[repr(C)]` struct and function of `include/tenferro_gpu.h`, which is
//! their manual.  The safe crate `tenferro-gpu` is built on them.
//!
//! # Two ways to reach the library
//!
//! - **`dynamic-loading`** (the default): nothing is linked.  The first call
//!   opens libtenferro_gpu.so.1 with `dlopen` (or the file named by the
//!   environment variable [`LIBRARY_PATH_VARIABLE`]) and resolves every
//!   function once into a [`Library`] table.  The crate builds where the
//!   library is not installed (documentation, CI), and a program starts
//!   without it: [`library()`] then returns a [`LoadError`] saying so.
//! - **`linked`**: the build script finds the library with pkg-config and
//!   links it; the loader then refuses to start a program without it.  It
//!   wins when both features are enabled.
//!
//! Either way the functions are reached the same two ways: the free
//! functions of this crate (`tf_version()`, ...; with `dynamic-loading`
//! they panic when the library is absent), or the table from
//! [`library()`], whose methods have the same names and signatures.  Both
//! come from one list, so the modes cannot disagree on a declaration.
//!
//! Functions added after 1.0 are optional with `dynamic-loading` (a 1.1
//! crate runs against a 1.0 library): their table fields are `Option`s and
//! their calls return `Result<_, MissingFunction>`.
//!
//! Everything here is `unsafe` to call and follows the header's contract
//! exactly.  Structs must be initialised with their `*_init` function
//! ([`initialised`]) before use.
//!
//! License: MIT OR Apache-2.0 (LICENSE, LICENSE-MIT and LICENSE-APACHE at
//! the top of the repository).

#![allow(non_camel_case_types)]

#[cfg(not(any(feature = "dynamic-loading", feature = "linked")))]
compile_error!("tenferro-gpu-sys: enable the feature `dynamic-loading` (the default) or `linked`");

#[macro_use]
mod functions;
mod header;
mod loader;

pub use header::*;
pub use loader::{library, LoadError, MissingFunction, LIBRARY_PATH_VARIABLE, LIBRARY_SONAME};

/// A `T` (one of this crate's structs) initialised by its `*_init` function
/// with this crate's `size_of::<T>()`.
///
/// # Safety
/// `init` must be the `*_init` function of `T` (a field of [`Library`], or
/// the linked function), and all-zero must be a valid `T` (true of every
/// struct here).
pub unsafe fn initialised<T>(init: unsafe extern "C" fn(*mut T, usize)) -> T {
    let mut value: T = std::mem::zeroed();
    init(&mut value, std::mem::size_of::<T>());
    value
}
