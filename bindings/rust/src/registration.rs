// SPDX-License-Identifier: MIT OR Apache-2.0
//! The caller's own memory page-locked for a runtime (`tf_host_register`,
//! `tf_host_unregister`), so that the asynchronous copies take it.  Two
//! ways, each sound whatever safe code does, `std::mem::forget` of a guard
//! or of a [`Transfer`](crate::Transfer) included:
//!
//! - [`Runtime::host_register`] takes a `Vec<T>` **by value** and
//!   [`Registered::unregister`] gives it back once no stream uses it.  The
//!   Vec cannot be freed while registered: forgetting the guard (or a
//!   transfer holding it) leaks the Vec, and a failed unregistration keeps
//!   it (or leaks it on drop).
//! - [`Runtime::with_host_registered`] lends memory you keep owning (a
//!   slice of a larger buffer, an array on the stack) for the length of a
//!   closure, and unregisters it, waiting for every stream that used it,
//!   before it returns, also when the closure panics.  The guard cannot
//!   leave the closure.  If the device's use cannot be shown over (the wait
//!   fails twice), the process aborts: returning would let the device write
//!   memory the caller may already reuse.
//!
//! Neither takes a plain `&mut [T]` that could outlive its registration
//! (this does not compile):
//!
//! ```compile_fail,E0308
//! # fn f(rt: &tenferro_gpu::Runtime, stream: &tenferro_gpu::Stream,
//! #      dev: &tenferro_gpu::DeviceBuffer<u8>) -> tenferro_gpu::Result<()> {
//! let mut data = vec![0u8; 4096];
//! let transfer = stream.download_async(dev, rt.host_register(&mut data)?)?;
//! std::mem::forget(transfer); // would end the borrow while the copy is queued
//! drop(data);                 // and the device would write freed memory
//! # Ok(()) }
//! ```
//!
//! nor lets the scoped guard out of its closure:
//!
//! ```compile_fail
//! # fn f(rt: &tenferro_gpu::Runtime) -> tenferro_gpu::Result<()> {
//! let mut data = [0u8; 4096];
//! let guard = rt.with_host_registered(&mut data, |reg| reg)?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::os::raw::c_void;

use crate::error::{check, Error, Result};
use crate::host::{record_use, since};
use crate::library::api;
use crate::memory::DeviceRepr;
use crate::pending_copies;
use crate::runtime::Runtime;
use crate::stream::Stream;

/// A `Vec<T>` page-locked for a runtime (`tf_host_register`), owned until
/// [`Registered::unregister`] gives it back; `Deref`/`DerefMut` to `[T]`,
/// and the asynchronous copies take it by value.  Dropping it unregisters
/// (`tf_host_unregister`, which waits for the streams that used the range)
/// and frees the Vec; if the device's use cannot be shown over, the Vec is
/// leaked instead.  It holds a reference to its runtime.
///
/// `Send` and `Sync` as `Vec<T>` is.
pub struct Registered<T: DeviceRepr> {
    runtime: Runtime,
    data: ManuallyDrop<Vec<T>>,
}

impl<T: DeviceRepr> Registered<T> {
    /// Notes that work you queued yourself on `stream` uses the range
    /// (`tf_host_record_use`), so that unregistering waits for it.
    pub fn record_use(&self, stream: &Stream) -> Result<()> {
        record_use(stream, self.data.as_ptr() as *mut c_void)
    }

    /// The runtime the range is registered with.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Waits for the streams that used the range, unregisters it and gives
    /// the Vec back.  On an error the range stays registered and the
    /// registration comes back in the error
    /// ([`UnregisterError::into_registration`]): try again, or drop it
    /// (which tries again and leaks the Vec if that fails too).
    pub fn unregister(self) -> std::result::Result<Vec<T>, UnregisterError<T>> {
        match self.end() {
            Ok(()) => {
                let mut this = ManuallyDrop::new(self);
                // SAFETY: `this` is never dropped; its fields are moved out
                // once each.
                let (runtime, data) =
                    unsafe { (std::ptr::read(&this.runtime), ManuallyDrop::take(&mut this.data)) };
                drop(runtime);
                Ok(data)
            }
            Err(error) => Err(UnregisterError { error, registration: self }),
        }
    }

    /// Settles a failed synchronous copy on the range, then unregisters it.
    fn end(&self) -> Result<()> {
        let ptr = self.data.as_ptr().cast::<u8>();
        let bytes = std::mem::size_of_val::<[T]>(&self.data);
        pending_copies::settle(&self.runtime, ptr, bytes, "Registered::unregister")?;
        unregister(&self.runtime, ptr as *mut c_void)
    }
}

fn register(runtime: &Runtime, ptr: *mut c_void, bytes: usize) -> Result<()> {
    let lib = api()?;
    // SAFETY: the caller keeps `bytes` at `ptr` alive until it is unregistered.
    check(since(unsafe { lib.tf_host_register(runtime.as_raw(), ptr, bytes) })?)
}

fn unregister(runtime: &Runtime, ptr: *mut c_void) -> Result<()> {
    let lib = api()?;
    // SAFETY: the start of a range this runtime registered.
    check(since(unsafe { lib.tf_host_unregister(runtime.as_raw(), ptr) })?)
}

impl<T: DeviceRepr> Deref for Registered<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.data
    }
}

impl<T: DeviceRepr> DerefMut for Registered<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
}

impl<T: DeviceRepr> Drop for Registered<T> {
    fn drop(&mut self) {
        if self.end().is_ok() {
            // SAFETY: dropped once, here; the device no longer uses it.
            unsafe { ManuallyDrop::drop(&mut self.data) }
        }
        // Otherwise the device may still use the Vec: it is leaked.
    }
}

impl<T: DeviceRepr> fmt::Debug for Registered<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered")
            .field("ptr", &self.data.as_ptr())
            .field("len", &self.data.len())
            .finish()
    }
}

/// [`Runtime::host_register`] failed: the error, and the Vec, untouched
/// and not registered ([`RegisterError::into_inner`]).
pub struct RegisterError<T> {
    error: Error,
    data: Vec<T>,
}

impl<T> RegisterError<T> {
    /// Why the registration failed.
    pub fn error(&self) -> &Error {
        &self.error
    }
    /// The Vec, as it was passed in.
    pub fn into_inner(self) -> Vec<T> {
        self.data
    }
}

/// [`Registered::unregister`] failed: the error, and the registration,
/// still registered ([`UnregisterError::into_registration`]).
pub struct UnregisterError<T: DeviceRepr> {
    error: Error,
    registration: Registered<T>,
}

impl<T: DeviceRepr> UnregisterError<T> {
    /// Why unregistering failed.
    pub fn error(&self) -> &Error {
        &self.error
    }
    /// The registration, to try again (or to drop, which tries once more).
    pub fn into_registration(self) -> Registered<T> {
        self.registration
    }
}

/// Both errors read as the library's error (as `std::io::IntoInnerError`
/// does): `Display` is its message, and it has no further `source`.
macro_rules! wrapped_error {
    ($name:ident, $bound:path, $what:literal) => {
        impl<T: $bound> fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("error", &self.error)
                    .finish_non_exhaustive()
            }
        }
        impl<T: $bound> fmt::Display for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.error, f)
            }
        }
        impl<T: $bound> std::error::Error for $name<T> {}
        #[doc = concat!("The error alone; ", $what)]
        impl<T: $bound> From<$name<T>> for Error {
            fn from(e: $name<T>) -> Error {
                e.error
            }
        }
    };
}
wrapped_error!(RegisterError, DeviceRepr, "the Vec is dropped.");
wrapped_error!(UnregisterError, DeviceRepr, "the registration is dropped (see its Drop).");

/// A `&mut [T]` page-locked for the length of a
/// [`Runtime::with_host_registered`] closure; `Deref`/`DerefMut` to the
/// slice, and the asynchronous copies take it by value.  It cannot leave
/// the closure, and dropping or forgetting it changes nothing: the scope
/// unregisters when the closure ends.
pub struct RegisteredSlice<'scope, T: DeviceRepr> {
    data: &'scope mut [T],
}

impl<T: DeviceRepr> RegisteredSlice<'_, T> {
    /// Notes that work you queued yourself on `stream` uses the range
    /// (`tf_host_record_use`), so that the scope's end waits for it.
    pub fn record_use(&self, stream: &Stream) -> Result<()> {
        record_use(stream, self.data.as_ptr() as *mut c_void)
    }
}

impl<T: DeviceRepr> Deref for RegisteredSlice<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T: DeviceRepr> DerefMut for RegisteredSlice<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.data
    }
}

impl<T: DeviceRepr> fmt::Debug for RegisteredSlice<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredSlice")
            .field("ptr", &self.data.as_ptr())
            .field("len", &self.data.len())
            .finish()
    }
}

/// The end of a [`Runtime::with_host_registered`] scope, however it ends.
struct ScopeEnd<'a> {
    runtime: &'a Runtime,
    ptr: *mut c_void,
    bytes: usize,
}

impl ScopeEnd<'_> {
    fn end(&self) -> Result<()> {
        let ptr = self.ptr as *const u8;
        pending_copies::settle(self.runtime, ptr, self.bytes, "Runtime::with_host_registered")?;
        unregister(self.runtime, self.ptr)
    }
}

impl Drop for ScopeEnd<'_> {
    fn drop(&mut self) {
        // The header lets a failed unregistration be retried; a second
        // failure leaves no sound way back to the caller.
        let Err(first) = self.end() else { return };
        let Err(second) = self.end() else { return };
        eprintln!(
            "tenferro-gpu: with_host_registered: the device may still use the caller's memory \
             and it cannot be unregistered ({first}; then {second}): aborting, since returning \
             would let the device write memory the caller may reuse"
        );
        std::process::abort();
    }
}

impl Runtime {
    /// Page-locks the values of `data` for this runtime
    /// (`tf_host_register`) and keeps the Vec until
    /// [`Registered::unregister`] gives it back.  Errors (the Vec comes
    /// back in the [`RegisterError`]; `?` turns it into an [`Error`]):
    /// InvalidArgument (empty, overlapping a range this runtime tracks,
    /// memory already page-locked), OutOfMemory, Cuda; NotSupported from a
    /// 1.0 library.
    pub fn host_register<T: DeviceRepr>(
        &self,
        mut data: Vec<T>,
    ) -> std::result::Result<Registered<T>, RegisterError<T>> {
        let ptr = data.as_mut_ptr().cast::<c_void>();
        let bytes = std::mem::size_of_val::<[T]>(&data);
        let registered = self.try_clone().and_then(|runtime| {
            register(&runtime, ptr, bytes)?;
            Ok(runtime)
        });
        match registered {
            Ok(runtime) => Ok(Registered { runtime, data: ManuallyDrop::new(data) }),
            Err(error) => Err(RegisterError { error, data }),
        }
    }

    /// Runs `f` with `data` page-locked for this runtime, as a
    /// [`RegisteredSlice`] the asynchronous copies take, and returns what
    /// `f` returns.  When `f` returns or panics, the range is unregistered
    /// (`tf_host_unregister`) after every stream that used it is done
    /// (copies this crate queued, uses you recorded), and after a sync of
    /// the slot of any failed synchronous copy on it: the device no longer
    /// touches `data` once this returns.  If that cannot be shown (it fails
    /// twice; or a failed copy through another runtime, whose slot has not
    /// synced since, may still use the range), the process aborts, as
    /// returning would let the device write memory the caller may reuse;
    /// [`Runtime::host_register`] leaks its Vec instead.  Errors (`f` did not run): those of
    /// [`Runtime::host_register`].
    pub fn with_host_registered<T: DeviceRepr, R>(
        &self,
        data: &mut [T],
        f: impl FnOnce(RegisteredSlice<'_, T>) -> R,
    ) -> Result<R> {
        let ptr = data.as_mut_ptr().cast::<c_void>();
        let bytes = std::mem::size_of_val(data);
        register(self, ptr, bytes)?;
        let _end = ScopeEnd { runtime: self, ptr, bytes };
        Ok(f(RegisteredSlice { data }))
    }
}
