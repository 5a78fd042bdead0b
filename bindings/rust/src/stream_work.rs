// SPDX-License-Identifier: MIT OR Apache-2.0
//! Work on the slot streams: cuBLAS and any library's work with closures,
//! ordering between slots, [`Event`]s.  Retirement is in retirement.rs.

use std::os::raw::c_void;
use std::ptr::NonNull;

use crate::callback::{cublas_trampoline, stream_trampoline, Frame};
use crate::error::{check, out_param, Result};
use crate::library::api;
use crate::runtime::Runtime;
use crate::sys;

/// Where alpha, beta and scalar results live for the cuBLAS calls of one
/// [`Runtime::cublas_enqueue`] (`enum tf_cublas_pointer_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PointerMode {
    Host,
    Device,
}

impl PointerMode {
    fn raw(self) -> i32 {
        match self {
            PointerMode::Host => sys::TF_CUBLAS_POINTER_MODE_HOST,
            PointerMode::Device => sys::TF_CUBLAS_POINTER_MODE_DEVICE,
        }
    }
}

impl Runtime {
    /// Runs `f(handle, stream)` with this thread's slot's cuBLAS handle (a
    /// `cublasHandle_t`) and stream (a `CUstream`) while the primary
    /// context is current and the slot's lock held (`tf_cublas_enqueue`).
    /// `f` returns the `cublasStatus_t` of its cuBLAS calls: nonzero becomes
    /// an Error with status Provider and code domain Cublas.  A panic in
    /// `f` is caught before it reaches C and resumed here.  `f` must not
    /// keep the handle or change its stream or workspace; calling
    /// `cublas_enqueue` or `stream_enqueue` from `f` fails with RuntimeState.
    /// Resolve cuBLAS functions with [`crate::cublas::symbol`] (or use
    /// [`Runtime::gemm`]).  Errors also: LibraryNotFound (no cuBLAS),
    /// NotSupported, OutOfMemory (the workspace), DeviceFault, Cuda.
    pub fn cublas_enqueue<F>(&self, mode: PointerMode, f: F) -> Result<()>
    where
        F: FnOnce(*mut c_void, *mut c_void) -> i32,
    {
        let lib = api()?;
        let mut frame = Frame::<F, ()>::new(f);
        // SAFETY: the trampoline's types match the frame's; the frame
        // outlives the call.
        let status = unsafe {
            lib.tf_cublas_enqueue(
                self.as_raw(),
                mode.raw(),
                Some(cublas_trampoline::<F>),
                frame.as_user_data(),
            )
        };
        frame.finish(status, "tf_cublas_enqueue")
    }

    /// Runs `f(stream)` with this thread's slot stream while the primary
    /// context is current and the slot's lock held (`tf_stream_enqueue`),
    /// for any library's work (NCCL, cuFFT, your own driver calls), and
    /// returns what `f` returns.  A panic in `f` is resumed here.
    pub fn stream_enqueue<F, R>(&self, f: F) -> Result<R>
    where
        F: FnOnce(*mut c_void) -> R,
    {
        let lib = api()?;
        let mut frame = Frame::<F, R>::new(f);
        // SAFETY: as in cublas_enqueue.
        let status = unsafe {
            lib.tf_stream_enqueue(
                self.as_raw(),
                Some(stream_trampoline::<F, R>),
                frame.as_user_data(),
            )
        };
        frame.finish(status, "tf_stream_enqueue")
    }

    /// Makes this thread's slot stream wait, on the device, for the work
    /// queued on slot `other_slot` before this call (`tf_slot_wait`).
    pub fn slot_wait(&self, other_slot: i32) -> Result<()> {
        let lib = api()?;
        // SAFETY: a live handle.
        check(unsafe { lib.tf_slot_wait(self.as_raw(), other_slot) })
    }

    /// A new [`Event`] in the runtime's primary context (`tf_event_new`).
    pub fn event(&self) -> Result<Event> {
        let lib = api()?;
        // SAFETY: a live handle and a valid out pointer.
        let raw = out_param(|out| unsafe { lib.tf_event_new(self.as_raw(), out) })?;
        Ok(Event { raw: NonNull::new(raw).expect("tf_event_new gave NULL") })
    }

    /// Records `event` on this handle's slot: it completes when the work
    /// queued there before this call is done (`tf_event_record`).
    pub fn record_event(&self, event: &Event) -> Result<()> {
        let lib = api()?;
        // SAFETY: live handles.
        check(unsafe { lib.tf_event_record(self.as_raw(), event.as_raw()) })
    }

    /// Makes this handle's slot wait, on the device, for the latest record
    /// of `event` (`tf_event_wait`).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        let lib = api()?;
        // SAFETY: live handles.
        check(unsafe { lib.tf_event_wait(self.as_raw(), event.as_raw()) })
    }
}

/// A CUDA event of one runtime (`tf_event *`), for ordering work across
/// slots, runtimes of one device, or with the host.  `Clone` adds a
/// reference (`tf_event_retain`), `Drop` releases one; the event keeps its
/// runtime alive.  Record and wait through [`Runtime::record_event`] and
/// [`Runtime::wait_event`] on the handle whose slot should record or wait.
pub struct Event {
    raw: NonNull<sys::tf_event>,
}

// SAFETY: Send + Sync.  The header makes events thread-safe: any thread
// may record, wait for, query or synchronize one, and retain and release
// are atomic; the last release happens in Drop, which needs ownership.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Event {
    /// The handle, borrowed: valid while `self` lives.
    pub fn as_raw(&self) -> *mut sys::tf_event {
        self.raw.as_ptr()
    }

    /// Blocks until the latest record is done (`tf_event_synchronize`).
    pub fn synchronize(&self) -> Result<()> {
        let lib = api()?;
        // SAFETY: a live event.
        check(unsafe { lib.tf_event_synchronize(self.as_raw()) })
    }

    /// Whether the latest record is done (or there was none), without
    /// waiting (`tf_event_query`).
    pub fn query(&self) -> Result<bool> {
        let lib = api()?;
        // SAFETY: a live event and a valid out pointer.
        Ok(out_param(|out| unsafe { lib.tf_event_query(self.as_raw(), out) })? != 0)
    }
}

impl Clone for Event {
    fn clone(&self) -> Event {
        let retained = api().and_then(|lib| {
            // SAFETY: a live event.
            check(unsafe { lib.tf_event_retain(self.as_raw()) })
        });
        retained.unwrap_or_else(|e| panic!("tenferro-gpu: {e}"));
        Event { raw: self.raw }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Ok(lib) = api() {
            // SAFETY: this reference is ours.
            unsafe { lib.tf_event_release(self.raw.as_ptr()) };
        }
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("handle", &self.raw.as_ptr()).finish()
    }
}
