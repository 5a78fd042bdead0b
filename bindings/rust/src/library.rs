// SPDX-License-Identifier: MIT OR Apache-2.0
//! Reaching libtenferro_gpu.so.1: every safe call takes the table of the
//! library's functions from here, so a missing library is an [`Error`]
//! (status [`Status::LibraryNotFound`](crate::Status::LibraryNotFound)),
//! never a crash or a failure to start.

use crate::error::{Error, Result};
use crate::sys;

/// The library's functions, or the error saying why they are missing.
#[inline]
pub(crate) fn api() -> Result<&'static sys::Library> {
    sys::library().map_err(Error::library_absent)
}

/// A versioned struct set by its `*_init` (picked from the table) to the
/// library's defaults; without the library, all zero but its struct_size
/// (calls that would use it fail then anyway).
pub(crate) fn defaults<T: Copy>(
    init: fn(&sys::Library) -> unsafe extern "C" fn(*mut T, usize),
) -> T {
    match api() {
        // SAFETY: the struct's own init sets struct_size and the defaults.
        Ok(lib) => unsafe { sys::initialised(init(lib)) },
        Err(_) => {
            // SAFETY: every versioned struct of the header is all-zero
            // valid and starts with `uint32_t struct_size` (the sys crate's
            // layout test checks its offset, 0).
            let mut value: T = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<T>() as u32;
            unsafe { std::ptr::addr_of_mut!(value).cast::<u32>().write(size) };
            value
        }
    }
}

/// Loads libtenferro_gpu.so.1 if no call did yet, and says whether it is
/// there.
///
/// With the default feature `dynamic-loading` the library is opened at the
/// first call that needs it (this one, or any other); a program starts
/// without it and every call then returns this same error: status
/// [`Status::LibraryNotFound`](crate::Status::LibraryNotFound), operation
/// and call `"dlopen"`, and a message naming the file, the loader's reason
/// and what to do.  The environment variable `TENFERRO_GPU_LIBRARY`, when
/// set, names the file to open instead of `libtenferro_gpu.so.1`.  With the
/// feature `linked` it always succeeds (the loader would not have started
/// the program otherwise).
pub fn load() -> Result<()> {
    api().map(|_| ())
}
