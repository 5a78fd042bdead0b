// SPDX-License-Identifier: MIT OR Apache-2.0
//! Rust closures behind the library's C callbacks.
//!
//! The closure and what it produced live in a [`Frame`] on the caller's
//! stack; the C callback receives a pointer to it as `user_data`.  The
//! trampoline runs the closure inside `catch_unwind`, because a panic must
//! never unwind into C: a panic becomes [`CALLBACK_PANICKED`] for the
//! library (which reports TF_ERROR_CALLBACK), and [`Frame::finish`]
//! resumes it with `resume_unwind` once the C call has returned.

use std::any::Any;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};

use crate::error::{check, Error, Result};
use crate::sys;

/// What a trampoline returns to the library when the closure panicked.
pub const CALLBACK_PANICKED: i32 = -1;

pub(crate) struct Frame<F, R> {
    closure: Option<F>,
    result: Option<R>,
    panic: Option<Box<dyn Any + Send + 'static>>,
}

impl<F, R> Frame<F, R> {
    pub(crate) fn new(closure: F) -> Self {
        Frame { closure: Some(closure), result: None, panic: None }
    }

    /// `user_data` for the C call; valid while `self` is neither moved nor
    /// dropped.
    pub(crate) fn as_user_data(&mut self) -> *mut c_void {
        (self as *mut Self).cast()
    }

    /// Runs the closure once through `invoke` (which supplies the callback's
    /// own arguments), catching a panic.  Returns the C callback's value.
    pub(crate) fn run(&mut self, invoke: impl FnOnce(F) -> R) -> i32 {
        self.run_status(|f| (invoke(f), 0))
    }

    /// As [`Frame::run`] for a closure that also chooses the C callback's
    /// value (a cuBLAS status).
    pub(crate) fn run_status(&mut self, invoke: impl FnOnce(F) -> (R, i32)) -> i32 {
        let Some(closure) = self.closure.take() else {
            return CALLBACK_PANICKED; // called twice: refuse, never run it again
        };
        match panic::catch_unwind(AssertUnwindSafe(|| invoke(closure))) {
            Ok((value, status)) => {
                self.result = Some(value);
                status
            }
            Err(payload) => {
                self.panic = Some(payload);
                CALLBACK_PANICKED
            }
        }
    }

    /// After the C call returned `status`: resumes the closure's panic, or
    /// returns the status's error, or the closure's result.
    pub(crate) fn finish(self, status: sys::tf_status, operation: &str) -> Result<R> {
        if let Some(payload) = self.panic {
            panic::resume_unwind(payload);
        }
        check(status)?;
        self.result.ok_or_else(|| {
            Error::internal(operation, "the library returned TF_OK without calling the callback")
        })
    }
}

/// The frame behind a C callback's `user_data`.
///
/// # Safety
/// `user_data` must come from [`Frame::as_user_data`] of a live
/// `Frame<F, R>` of exactly these types, not otherwise borrowed.
pub(crate) unsafe fn frame<'a, F, R>(user_data: *mut c_void) -> &'a mut Frame<F, R> {
    &mut *user_data.cast::<Frame<F, R>>()
}

/// `int32_t (*fn)(void *user_data)` of tf_with_context, for a `FnOnce() -> R`.
pub(crate) unsafe extern "C" fn with_context_trampoline<F: FnOnce() -> R, R>(
    user_data: *mut c_void,
) -> i32 {
    frame::<F, R>(user_data).run(|f| f())
}

/// `int32_t (*fn)(void *cublas_handle, void *stream, void *user_data)` of
/// tf_cublas_enqueue, for a closure returning a cublasStatus_t.
pub(crate) unsafe extern "C" fn cublas_trampoline<F: FnOnce(*mut c_void, *mut c_void) -> i32>(
    handle: *mut c_void,
    stream: *mut c_void,
    user_data: *mut c_void,
) -> i32 {
    frame::<F, ()>(user_data).run_status(|f| ((), f(handle, stream)))
}

/// `int32_t (*fn)(void *stream, void *user_data)` of tf_stream_enqueue.
pub(crate) unsafe extern "C" fn stream_trampoline<F: FnOnce(*mut c_void) -> R, R>(
    stream: *mut c_void,
    user_data: *mut c_void,
) -> i32 {
    frame::<F, R>(user_data).run(|f| f(stream))
}

/// A retirement's release: the closure, boxed, is the resource.
pub(crate) type Release = Box<dyn FnOnce() + Send + 'static>;

/// `void (*release)(void *resource, void *user_data)` of
/// tf_workspace_retire.  It runs later, from another call, maybe on
/// another thread: there is no caller to resume a panic in, so a panic is
/// caught (the panic hook has reported it) and dropped; it never unwinds
/// into C.
pub(crate) unsafe extern "C" fn release_trampoline(resource: *mut c_void, _user_data: *mut c_void) {
    let release: Box<Release> = Box::from_raw(resource.cast::<Release>());
    let _ = panic::catch_unwind(AssertUnwindSafe(move || release()));
}
