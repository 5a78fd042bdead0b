// SPDX-License-Identifier: MIT OR Apache-2.0
//! Routing the library's warnings (restore and teardown failures) to Rust.
//!
//! By default the library writes them to stderr prefixed "tenferro-gpu: ".
//! [`set_log_callback`] sends them to a closure instead; the library calls
//! it from whichever thread hit the problem, possibly several at once, so
//! it must be `Send + Sync`.  Forward to your logger there:
//!
//! ```no_run
//! tenferro_gpu::set_log_callback(|level, message| eprintln!("[{level:?}] {message}"))?;
//! # Ok::<(), tenferro_gpu::Error>(())
//! ```

use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::Mutex;

use crate::error::{check, Result};
use crate::library::api;
use crate::sys;

/// Severity of a log message (`enum tf_log_level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LogLevel {
    /// Something was leaked or could not be restored.
    Warning,
    /// A failure nobody else can be told about.
    Error,
    /// A level this crate does not know (from a newer library).
    Other(i32),
}

impl LogLevel {
    fn from_raw(raw: i32) -> LogLevel {
        match raw {
            sys::TF_LOG_WARNING => LogLevel::Warning,
            sys::TF_LOG_ERROR => LogLevel::Error,
            other => LogLevel::Other(other),
        }
    }
}

type Callback = Box<dyn Fn(LogLevel, &str) + Send + Sync + 'static>;

/// The callback the library holds (boxed twice for a thin pointer), kept
/// alive until the library has let go of it.  The mutex serializes
/// installations so that this always matches what the library holds.
static INSTALLED: Mutex<Option<Box<Callback>>> = Mutex::new(None);

thread_local! {
    /// Depth of log callbacks running on this thread.
    static IN_CALLBACK: Cell<u32> = const { Cell::new(0) };
}

unsafe extern "C" fn trampoline(level: i32, message: *const c_char, user_data: *mut c_void) {
    let callback = &*user_data.cast::<Callback>();
    let text = if message.is_null() {
        String::new()
    } else {
        CStr::from_ptr(message).to_string_lossy().into_owned()
    };
    IN_CALLBACK.with(|d| d.set(d.get() + 1));
    // A panic must not unwind into C, and there is no caller to hand it to.
    let outcome =
        panic::catch_unwind(AssertUnwindSafe(|| callback(LogLevel::from_raw(level), &text)));
    IN_CALLBACK.with(|d| d.set(d.get() - 1));
    if outcome.is_err() {
        eprintln!("tenferro-gpu: the Rust log callback panicked on: {text}");
    }
}

fn install(callback: Option<Callback>) -> Result<()> {
    let lib = api()?;
    if IN_CALLBACK.with(|d| d.get()) > 0 {
        // The library refuses this (it would wait for the very callback
        // that is calling); skip the mutex, which another thread may hold
        // while it waits for this callback to return.
        // SAFETY: NULL restores the default; no pointer is kept.
        return check(unsafe { lib.tf_set_log_callback(None, ptr::null_mut()) });
    }
    let mut installed = INSTALLED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut boxed = callback.map(Box::new);
    let (f, user_data): (sys::tf_log_fn, *mut c_void) = match boxed.as_mut() {
        Some(b) => (Some(trampoline), (&mut **b as *mut Callback).cast()),
        None => (None, ptr::null_mut()),
    };
    // SAFETY: `user_data` points into `boxed`, which is stored below and
    // kept until a later installation returns (after which the library
    // never calls it again).
    check(unsafe { lib.tf_set_log_callback(f, user_data) })?;
    *installed = boxed;
    Ok(())
}

/// Sends log messages to `callback(level, message)`.  When this returns,
/// the previous callback is never called again; it waits for calls of the
/// previous callback in progress on other threads.  A panic in `callback`
/// is caught and reported on stderr.  Errors: RuntimeState when called
/// from inside a log callback; LibraryNotFound without libtenferro_gpu.so.1.
pub fn set_log_callback<F>(callback: F) -> Result<()>
where
    F: Fn(LogLevel, &str) + Send + Sync + 'static,
{
    install(Some(Box::new(callback)))
}

/// Sends log messages back to the library's default, stderr.
pub fn reset_log_callback() -> Result<()> {
    install(None)
}
