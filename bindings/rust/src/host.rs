// SPDX-License-Identifier: MIT OR Apache-2.0
//! Page-locked host memory and asynchronous copies (include/tenferro_gpu.h,
//! `tf_host_alloc` .. `tf_upload_async`; docs/transfers.md, "Page-locked
//! host memory" and "Asynchronous copies").  New in 1.1: against a 1.0
//! library every call here returns a NotSupported error saying the loaded
//! library is too old.
//!
//! An asynchronous copy takes its host side *by value* (a [`HostBuffer`] or
//! a [`Registered`] guard) and gives it back from [`Transfer::wait`]: while
//! the device may use the memory, no safe code can reach it.  The device
//! side is borrowed for the transfer's lifetime.

use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::{Deref, DerefMut};
use std::os::raw::c_void;
use std::ptr::NonNull;

use crate::error::{check, Error, Result};
use crate::library::api;
use crate::memory::{byte_len, AsDeviceSlice, AsDeviceSliceMut, DeviceRepr};
use crate::runtime::Runtime;
use crate::stream::Stream;
use crate::stream_work::Event;
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
/// has passed the free.  The contents start as whatever the block held
/// (any bit pattern, a valid `T`).  It holds a reference to its runtime.
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
    /// ignores it.
    pub fn free(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped; its runtime is moved out once.
        let runtime = unsafe { std::ptr::read(&this.runtime) };
        free_block(&runtime, this.ptr.as_ptr().cast())
    }
}

fn free_block(runtime: &Runtime, ptr: *mut c_void) -> Result<()> {
    let lib = api()?;
    // SAFETY: a live block of this runtime, freed once.
    check(since(unsafe { lib.tf_host_free(runtime.as_raw(), ptr) })?)
}

fn record_use(stream: &Stream, ptr: *mut c_void) -> Result<()> {
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
        let _ = free_block(&self.runtime, self.ptr.as_ptr().cast());
    }
}

impl<T: DeviceRepr> std::fmt::Debug for HostBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

/// The caller's `&mut [T]` page-locked for a runtime (`tf_host_register`),
/// so the asynchronous copies take it; `Deref`/`DerefMut` to the slice.
/// Dropping it unregisters (`tf_host_unregister`, which first waits for the
/// streams that used the range) and ends the borrow.
///
/// Do not `std::mem::forget` it, nor a [`Transfer`] holding it: the borrow
/// would end while the range stays registered and a copy may still run.
pub struct Registered<'a, T: DeviceRepr> {
    runtime: Runtime,
    data: &'a mut [T],
}

impl<'a, T: DeviceRepr> Registered<'a, T> {
    /// Notes that work you queued yourself on `stream` uses the range
    /// (`tf_host_record_use`).
    pub fn record_use(&self, stream: &Stream) -> Result<()> {
        record_use(stream, self.data.as_ptr() as *mut c_void)
    }

    /// Unregisters now and reports a failure (the range then stays
    /// registered until the runtime's last release).
    pub fn unregister(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped; its runtime is moved out once.
        let runtime = unsafe { std::ptr::read(&this.runtime) };
        unregister(&runtime, this.data.as_ptr() as *mut c_void)
    }
}

fn unregister(runtime: &Runtime, ptr: *mut c_void) -> Result<()> {
    let lib = api()?;
    // SAFETY: the start of a range this runtime registered.
    check(since(unsafe { lib.tf_host_unregister(runtime.as_raw(), ptr) })?)
}

impl<T: DeviceRepr> Deref for Registered<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T: DeviceRepr> DerefMut for Registered<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.data
    }
}

impl<T: DeviceRepr> Drop for Registered<'_, T> {
    fn drop(&mut self) {
        let _ = unregister(&self.runtime, self.data.as_ptr() as *mut c_void);
    }
}

impl<T: DeviceRepr> std::fmt::Debug for Registered<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("ptr", &self.data.as_ptr())
            .field("len", &self.data.len())
            .finish()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Host memory the asynchronous copies take: [`HostBuffer`] and
/// [`Registered`].  Sealed.
pub trait PinnedMemory: sealed::Sealed + DerefMut<Target = [Self::Elem]> {
    /// The element type.
    type Elem: DeviceRepr;
}

impl<T: DeviceRepr> sealed::Sealed for HostBuffer<T> {}
impl<T: DeviceRepr> PinnedMemory for HostBuffer<T> {
    type Elem = T;
}
impl<T: DeviceRepr> sealed::Sealed for Registered<'_, T> {}
impl<T: DeviceRepr> PinnedMemory for Registered<'_, T> {
    type Elem = T;
}

/// An asynchronous copy in flight: it owns the host memory `H` until
/// [`Transfer::wait`] hands it back, and borrows the device memory for
/// `'d`.  [`Transfer::query`] asks without waiting; [`Transfer::event`]
/// orders other streams after the copy.  Dropping it waits for the copy
/// (ignoring an error) before the memory is dropped.
#[must_use = "dropping a Transfer waits for the copy; call wait() to get the memory back"]
pub struct Transfer<'d, H: PinnedMemory> {
    host: Option<H>,
    event: Event,
    _device: PhantomData<&'d mut ()>,
}

impl<'d, H: PinnedMemory> Transfer<'d, H> {
    /// Whether the copy has finished (`tf_event_query`), without waiting.
    pub fn query(&self) -> Result<bool> {
        self.event.query()
    }

    /// The event recorded right after the copy.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// Blocks until the copy has finished (`tf_event_synchronize`) and
    /// gives the host memory back.  On an error the copy's state is
    /// unknown: the memory is dropped after this returns (a HostBuffer goes
    /// back to the pool, which waits; a Registered range is unregistered,
    /// which waits for its streams).
    pub fn wait(mut self) -> Result<H> {
        self.event.synchronize()?;
        Ok(self.host.take().expect("a Transfer holds its memory until waited"))
    }
}

impl<H: PinnedMemory> Drop for Transfer<'_, H> {
    fn drop(&mut self) {
        if self.host.is_some() {
            let _ = self.event.synchronize();
        }
    }
}

impl<H: PinnedMemory> std::fmt::Debug for Transfer<'_, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transfer").field("event", &self.event).finish()
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

    /// Page-locks `data` for this runtime (`tf_host_register`) until the
    /// returned guard drops.  Errors: InvalidArgument (empty, overlapping a
    /// range this runtime tracks, memory already page-locked), OutOfMemory,
    /// Cuda; NotSupported from a 1.0 library.
    pub fn host_register<'a, T: DeviceRepr>(&self, data: &'a mut [T]) -> Result<Registered<'a, T>> {
        let lib = api()?;
        let runtime = self.try_clone()?;
        let bytes = std::mem::size_of_val(data);
        // SAFETY: `data` is borrowed for as long as it stays registered.
        check(since(unsafe {
            lib.tf_host_register(self.as_raw(), data.as_mut_ptr().cast(), bytes)
        })?)?;
        Ok(Registered { runtime, data })
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

impl Stream {
    /// Queues a copy of `src` into `dst` (of the same length) on this
    /// stream, after its earlier work (`tf_download_async`), and returns at
    /// once.  `dst` comes back from [`Transfer::wait`].  Errors:
    /// InvalidArgument (lengths differ, memory of another runtime), the
    /// device statuses; `dst` is dropped on an error.
    pub fn download_async<'d, H: PinnedMemory>(
        &self,
        src: &'d impl AsDeviceSlice<H::Elem>,
        mut dst: H,
    ) -> Result<Transfer<'d, H>> {
        let src = src.as_device_slice();
        Stream::same_len(src.len(), dst.len(), "Stream::download_async")?;
        let event = self.runtime().event()?;
        let lib = api()?;
        let bytes = dst.len() * size_of::<H::Elem>();
        // SAFETY: `dst` is tracked host memory the Transfer owns until the
        // copy is observed done; `src` is borrowed as long.
        check(since(unsafe {
            lib.tf_download_async(self.as_raw(), src.as_raw(), dst.as_mut_ptr().cast(), bytes)
        })?)?;
        self.finish(event, dst)
    }

    /// Queues a copy of `src` into `dst` (of the same length) on this
    /// stream, after its earlier work (`tf_upload_async`), and returns at
    /// once; `src` comes back from [`Transfer::wait`].  Errors as
    /// [`Stream::download_async`].
    pub fn upload_async<'d, H: PinnedMemory>(
        &self,
        src: H,
        dst: &'d mut impl AsDeviceSliceMut<H::Elem>,
    ) -> Result<Transfer<'d, H>> {
        let dst = dst.as_device_slice_mut();
        Stream::same_len(src.len(), dst.len(), "Stream::upload_async")?;
        let event = self.runtime().event()?;
        let lib = api()?;
        let bytes = src.len() * size_of::<H::Elem>();
        // SAFETY: as in download_async.
        check(since(unsafe {
            lib.tf_upload_async(self.as_raw(), src.as_ptr().cast(), dst.as_raw(), bytes)
        })?)?;
        self.finish(event, src)
    }

    /// Records `event` after the queued copy.  If that fails the copy may
    /// run: wait for the stream before the memory can be dropped.
    fn finish<'d, H: PinnedMemory>(&self, event: Event, host: H) -> Result<Transfer<'d, H>> {
        if let Err(e) = self.runtime().record_event(&event) {
            if self.sync().is_err() {
                // The device's use cannot be bounded: never free the memory.
                std::mem::forget(host);
            }
            return Err(e);
        }
        Ok(Transfer { host: Some(host), event, _device: PhantomData })
    }
}

impl Error {
    pub(crate) fn missing(name: &'static str, since: &'static str) -> Error {
        Error::missing_function(&sys::MissingFunction::new(name, since))
    }
}
