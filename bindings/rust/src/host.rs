// SPDX-License-Identifier: MIT OR Apache-2.0
//! The runtime's pool of page-locked host memory (include/tenferro_gpu.h,
//! `tf_host_alloc` .. `tf_host_trim`; docs/transfers.md, "Page-locked host
//! memory"): [`HostBuffer`], the pool's counters and trim.  Registration
//! is in registration.rs, the asynchronous copies in async_copy.rs.  New in
//! 1.1: against a 1.0 library every call here returns a NotSupported error
//! saying the loaded library is too old.

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::os::raw::c_void;
use std::ptr::NonNull;

use crate::error::{check, Error, Result};
use crate::library::api;
use crate::memory::{byte_len, DeviceRepr};
use crate::pending_copies;
use crate::runtime::Runtime;
use crate::stream::Stream;
use crate::sys;

/// What an optional (1.1) function of the table returned, or the error
/// saying the loaded library is too old.
pub(crate) fn since<T>(result: std::result::Result<T, sys::MissingFunction>) -> Result<T> {
    result.map_err(|missing| Error::missing_function(&missing))
}

/// `len` values of `T` in page-locked host memory from the runtime's
/// caching pool (`tf_host_alloc`), like a `Box<[T]>`: `Deref` and
/// `DerefMut` to `[T]`.  Dropping it gives the block back to the pool
/// (`tf_host_free`), which reuses it only once every stream that used it
/// has passed the free; after a failed synchronous copy that may still use
/// it, only once a sync of that copy's slot succeeds (else it is leaked).
/// The contents start as whatever the block held (any bit pattern, a valid
/// `T`).  It holds a reference to its runtime, which therefore outlives it.
///
/// `Send` and `Sync` as `Box<[T]>` is (every [`DeviceRepr`] is both): the
/// pool's calls are thread-safe, and the memory is ordinary host memory.
pub struct HostBuffer<T: DeviceRepr> {
    runtime: Runtime,
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: as Box<[T]>: the buffer owns its values (T: Send + Sync by
// DeviceRepr) and the runtime handle is Send + Sync; the free in Drop is
// allowed from any thread.
unsafe impl<T: DeviceRepr> Send for HostBuffer<T> {}
unsafe impl<T: DeviceRepr> Sync for HostBuffer<T> {}

impl<T: DeviceRepr> HostBuffer<T> {
    /// The block's address (valid while `self` lives).
    pub fn as_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }

    /// The runtime the block belongs to.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Notes that work you queued yourself on `stream` uses this block
    /// (`tf_host_record_use`), so that its free waits for that work.  The
    /// crate's own copies record their uses.
    pub fn record_use(&self, stream: &Stream) -> Result<()> {
        record_use(stream, self.ptr.as_ptr().cast())
    }

    /// Gives the block back to the pool now and reports a failure (the
    /// block is then leaked, never reused); dropping does the same and
    /// ignores it.  A failed synchronous copy that may still use the block
    /// is first waited for with a sync of its slot; if that fails, the
    /// block is leaked and the sync's error returned.
    pub fn free(self) -> Result<()> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped; its runtime is moved out once.
        let runtime = unsafe { std::ptr::read(&this.runtime) };
        release_block(&runtime, this.ptr.as_ptr().cast(), this.byte_len())
    }

    /// Bytes of the values (not of the block's size class).
    fn byte_len(&self) -> usize {
        // Checked when the block was allocated.
        std::mem::size_of_val::<[T]>(self)
    }
}

/// Frees the block unless a failed copy may still use it (then leaks it).
fn release_block(runtime: &Runtime, ptr: *mut c_void, len: usize) -> Result<()> {
    pending_copies::settle(runtime, ptr as *const u8, len, "HostBuffer::free")?;
    let lib = api()?;
    // SAFETY: a live block of this runtime, freed once.
    check(since(unsafe { lib.tf_host_free(runtime.as_raw(), ptr) })?)
}

pub(crate) fn record_use(stream: &Stream, ptr: *mut c_void) -> Result<()> {
    let lib = api()?;
    // SAFETY: a live handle; the library checks the address.
    check(since(unsafe { lib.tf_host_record_use(stream.as_raw(), ptr) })?)
}

impl<T: DeviceRepr> Deref for HostBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` values of the live block, which only `self` reaches.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceRepr> DerefMut for HostBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceRepr> Drop for HostBuffer<T> {
    fn drop(&mut self) {
        let _ = release_block(&self.runtime, self.ptr.as_ptr().cast(), self.byte_len());
    }
}

impl<T: DeviceRepr> std::fmt::Debug for HostBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

/// A consistent snapshot of a runtime's page-locked memory counters
/// (`tf_host_pool_stats`).  Bytes are size classes, what the driver holds:
/// `bytes_in_use + bytes_cached` is what the pool holds from the driver;
/// `pending_frees <= blocks_cached`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostPoolStats {
    pub bytes_in_use: u64,
    pub bytes_cached: u64,
    pub bytes_registered: u64,
    pub blocks_in_use: u64,
    pub blocks_cached: u64,
    pub driver_allocations: u64,
    pub pending_frees: u64,
}

impl Runtime {
    /// A [`HostBuffer`] of `len` values from the runtime's page-locked pool
    /// (`tf_host_alloc`).  Errors: InvalidArgument (`len` 0, the size
    /// overflows), OutOfMemory, Cuda; NotSupported from a 1.0 library.
    pub fn host_alloc<T: DeviceRepr>(&self, len: usize) -> Result<HostBuffer<T>> {
        let bytes = byte_len::<T>(len, "Runtime::host_alloc")?;
        let lib = api()?;
        let runtime = self.try_clone()?;
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live handle and a valid out pointer.
        check(since(unsafe { lib.tf_host_alloc(self.as_raw(), bytes, &mut out) })?)?;
        let ptr = NonNull::new(out.cast::<T>()).expect("tf_host_alloc gave NULL");
        // The pool's blocks start at multiples of 4 KiB: aligned for any T.
        debug_assert_eq!(out as usize % std::mem::align_of::<T>(), 0);
        Ok(HostBuffer { runtime, ptr, len })
    }

    /// The runtime's page-locked memory counters (`tf_host_stats`).
    pub fn host_stats(&self) -> Result<HostPoolStats> {
        let lib = api()?;
        let init = lib
            .tf_host_pool_stats_init
            .ok_or_else(|| Error::missing("tf_host_pool_stats_init", "1.1"))?;
        // SAFETY: the struct's own init, a live handle.
        let mut raw = unsafe { sys::initialised(init) };
        check(since(unsafe { lib.tf_host_stats(self.as_raw(), &mut raw) })?)?;
        Ok(HostPoolStats {
            bytes_in_use: raw.bytes_in_use,
            bytes_cached: raw.bytes_cached,
            bytes_registered: raw.bytes_registered,
            blocks_in_use: raw.blocks_in_use,
            blocks_cached: raw.blocks_cached,
            driver_allocations: raw.driver_allocations,
            pending_frees: raw.pending_frees,
        })
    }

    /// Gives every cached block no stream still uses back to the driver
    /// (`tf_host_trim`).
    pub fn host_trim(&self) -> Result<()> {
        let lib = api()?;
        // SAFETY: a live handle.
        check(since(unsafe { lib.tf_host_trim(self.as_raw()) })?)
    }
}

impl Error {
    pub(crate) fn missing(name: &'static str, since: &'static str) -> Error {
        Error::missing_function(&sys::MissingFunction::new(name, since))
    }
}
