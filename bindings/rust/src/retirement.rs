// SPDX-License-Identifier: MIT OR Apache-2.0
//! Workspace retirement (`tf_workspace_retire`, `tf_workspace_poll`,
//! `tf_workspace_stats`): a release that runs once the device has passed
//! the work queued so far, without making the host wait.
//!
//! A release runs inside a later `tf_workspace_retire`, `tf_workspace_poll`
//! or `tf_runtime_sync` of its runtime, or at the runtime's teardown.  A
//! release that owned a handle of its runtime (a `Runtime`, a `Stream`, a
//! `DeviceBuffer`, ...) would hold a reference that only the release gives
//! back: with every other handle dropped, nothing would run it and the
//! runtime would never be torn down.  So [`DeviceBuffer::retire`] keeps no
//! handle: its release frees through the handle whose call runs it, which
//! [`running_releases`] keeps in a thread-local for the length of those
//! three calls; at teardown there is none, and the allocation goes with
//! the primary context.
//!
//! [`DeviceBuffer::retire`]: crate::DeviceBuffer::retire

use std::cell::Cell;
use std::ptr;

use crate::callback::{release_trampoline, Release};
use crate::error::{check, Result};
use crate::library::api;
use crate::runtime::Runtime;
use crate::sys;

thread_local! {
    /// The handle whose call may be running releases on this thread.
    static RUNNING: Cell<*mut sys::tf_runtime> = const { Cell::new(ptr::null_mut()) };
}

/// `call` (a `tf_runtime_sync`, `tf_workspace_poll` or
/// `tf_workspace_retire` through `handle`), with `handle` known to the
/// releases it runs on this thread.
pub(crate) fn running_releases(
    handle: &Runtime,
    call: impl FnOnce() -> sys::tf_status,
) -> sys::tf_status {
    let outer = RUNNING.with(|r| r.replace(handle.as_raw()));
    let status = call();
    RUNNING.with(|r| r.set(outer));
    status
}

/// A release's `tf_free` of `ptr`, device memory of the runtime whose
/// identity is `runtime`: through the handle whose call runs the release
/// when that is one of the same runtime; at teardown (no such call) the
/// memory goes with the context instead.
pub(crate) fn free_in_release(runtime: u64, ptr: u64) {
    let handle = RUNNING.with(Cell::get);
    let Ok(lib) = api() else { return };
    if handle.is_null() {
        return;
    }
    let mut identity = 0u64;
    // SAFETY: the handle of the call running this release lives until the
    // call returns.
    if unsafe { lib.tf_runtime_identity(handle, &mut identity) } != sys::TF_OK
        || identity != runtime
    {
        return;
    }
    // SAFETY: as above; the allocation is this release's to free, once.
    // A failure has no caller to go to; the memory is then leaked.
    let _ = unsafe { lib.tf_free(handle, ptr) };
}

/// A consistent snapshot of a runtime's retirement counters
/// (`tf_retirement_stats`).  Every accepted retirement (queued: `deferred`;
/// never queued, once its stream wait returned: `barrier_fallbacks`) is in
/// exactly one of released, leaked and in_flight: `deferred +
/// barrier_fallbacks == released + leaked + in_flight` in every snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetirementStats {
    pub capacity: u32,
    pub deferred: u64,
    pub released: u64,
    pub barrier_fallbacks: u64,
    pub leaked: u64,
    pub in_flight: u64,
    pub max_in_flight: u64,
}

/// What became of a release handed to the library.
pub(crate) enum Retired {
    /// Accepted: it runs once (or has run), or leaks if the library says so.
    Accepted,
    /// Refused (InvalidArgument, InvalidHandle): dropped without running.
    Refused,
    /// Any other failure: the device may still use what it owns; leaked.
    Leaked,
}

impl Runtime {
    /// Runs `release` once the device has finished the work queued so far
    /// on this thread's slot, without making the host wait
    /// (`tf_workspace_retire`).  It runs exactly once, on the thread of a
    /// later `retire`, [`Runtime::poll_retirements`] or [`Runtime::sync`]
    /// on any slot, or at the runtime's teardown (then it must not call
    /// this runtime).  A panic in it is caught and dropped.
    ///
    /// A release that owns a handle of this runtime (a `Runtime`, `Stream`,
    /// `DeviceBuffer`, `HostBuffer`, `Event`, ...) keeps the runtime alive
    /// until it runs: if every other handle is dropped first, nothing runs
    /// it and the runtime is never torn down (a leak).  Free device memory
    /// with [`DeviceBuffer::retire`](crate::DeviceBuffer::retire), which
    /// holds no handle; a `HostBuffer` may simply be dropped (the pool
    /// waits for the streams that used it).
    ///
    /// If the library refuses (InvalidArgument, InvalidHandle) `release` is
    /// dropped without running.  On any other error the device may still
    /// use what `release` owns, so it is leaked, never dropped.
    ///
    /// `release` must be `Send`: it may run on another thread.  This does
    /// not compile (an `Rc` is not `Send`):
    ///
    /// ```compile_fail,E0277
    /// # fn f(rt: &tenferro_gpu::Runtime) {
    /// let shared = std::rc::Rc::new(vec![0u8; 16]);
    /// rt.retire(move || drop(shared));
    /// # }
    /// ```
    pub fn retire<F>(&self, release: F) -> Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        self.retire_boxed(Box::new(release)).1
    }

    /// [`Runtime::retire`] of a boxed release, saying what became of it.
    pub(crate) fn retire_boxed(&self, release: Release) -> (Retired, Result<()>) {
        let lib = match api() {
            Ok(lib) => lib,
            Err(e) => return (Retired::Refused, Err(e)),
        };
        let resource: *mut Release = Box::into_raw(Box::new(release));
        // SAFETY: release_trampoline takes back exactly this box, once.
        let status = running_releases(self, || unsafe {
            lib.tf_workspace_retire(
                self.as_raw(),
                resource.cast(),
                Some(release_trampoline),
                ptr::null_mut(),
            )
        });
        let result = check(status);
        let fate = match status {
            sys::TF_OK => Retired::Accepted,
            sys::TF_ERROR_INVALID_ARGUMENT | sys::TF_ERROR_INVALID_HANDLE => {
                // SAFETY: the library did not take the resource.
                drop(unsafe { Box::from_raw(resource) });
                Retired::Refused
            }
            _ => Retired::Leaked,
        };
        (fate, result)
    }

    /// Runs the releases of every retirement the device has passed, on all
    /// slots, without waiting (`tf_workspace_poll`).
    pub fn poll_retirements(&self) -> Result<()> {
        let lib = api()?;
        // SAFETY: a live handle.
        check(running_releases(self, || unsafe { lib.tf_workspace_poll(self.as_raw()) }))
    }

    /// The runtime's retirement counters (`tf_workspace_stats`).
    pub fn retirement_stats(&self) -> Result<RetirementStats> {
        let lib = api()?;
        // SAFETY: the struct's own init, a live handle.
        let mut raw = unsafe { sys::initialised(lib.tf_retirement_stats_init) };
        check(unsafe { lib.tf_workspace_stats(self.as_raw(), &mut raw) })?;
        Ok(RetirementStats {
            capacity: raw.capacity,
            deferred: raw.deferred,
            released: raw.released,
            barrier_fallbacks: raw.barrier_fallbacks,
            leaked: raw.leaked,
            in_flight: raw.in_flight,
            max_in_flight: raw.max_in_flight,
        })
    }
}
