// SPDX-License-Identifier: MIT OR Apache-2.0
//! Asynchronous copies between page-locked host memory and the device
//! (`tf_download_async`, `tf_upload_async`; docs/transfers.md,
//! "Asynchronous copies").
//!
//! A copy takes its host side *by value* (a [`HostBuffer`], a
//! [`Registered`] Vec or a [`RegisteredSlice`]) and [`Transfer::wait`]
//! gives it back: while the device may use the memory, no safe code can
//! reach it.  Forgetting the [`Transfer`] (`std::mem::forget` is safe)
//! only leaks it: the host memory is never freed while the copy may run,
//! because the pool waits for the copy before it reuses a block,
//! unregistering waits for it, and a leaked `Registered` keeps its Vec.
//! The device side is borrowed for the transfer's lifetime.

use std::marker::PhantomData;
use std::ops::DerefMut;

use crate::capture_gate;
use crate::error::{check, Result};
use crate::host::{since, HostBuffer};
use crate::library::api;
use crate::memory::{AsDeviceSlice, AsDeviceSliceMut, DeviceRepr};
use crate::recorded_use::DeviceUse;
use crate::registration::{Registered, RegisteredSlice};
use crate::stream::Stream;
use crate::stream_work::Event;

mod sealed {
    pub trait Sealed {}
}

/// Host memory the asynchronous copies take: [`HostBuffer`],
/// [`Registered`] and [`RegisteredSlice`], each page-locked for its runtime
/// and released only once no stream still uses it.  Sealed.
pub trait PinnedMemory: sealed::Sealed + DerefMut<Target = [Self::Elem]> {
    /// The element type.
    type Elem: DeviceRepr;
}

impl<T: DeviceRepr> sealed::Sealed for HostBuffer<T> {}
impl<T: DeviceRepr> PinnedMemory for HostBuffer<T> {
    type Elem = T;
}
impl<T: DeviceRepr> sealed::Sealed for Registered<T> {}
impl<T: DeviceRepr> PinnedMemory for Registered<T> {
    type Elem = T;
}
impl<T: DeviceRepr> sealed::Sealed for RegisteredSlice<'_, T> {}
impl<T: DeviceRepr> PinnedMemory for RegisteredSlice<'_, T> {
    type Elem = T;
}

/// An asynchronous copy in flight: it owns the host memory `H` until
/// [`Transfer::wait`] hands it back, and borrows the device memory for
/// `'d`.  [`Transfer::query`] asks without waiting; [`Transfer::event`]
/// orders other streams after the copy.  Dropping it waits for the copy
/// (ignoring an error) before the memory is dropped; forgetting it leaks
/// the memory.
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
    /// unknown: the memory is dropped after this returns, which waits for
    /// the copy (a HostBuffer goes back to the pool, which waits; a
    /// Registered Vec is unregistered, which waits for its streams, or
    /// leaked; a RegisteredSlice is unregistered by its scope).
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
        let bytes = std::mem::size_of_val::<[H::Elem]>(&dst);
        capture_gate::async_copy(self, "Stream::download_async", || {
            // SAFETY: `dst` is tracked host memory the Transfer owns until
            // the copy is observed done; `src` is borrowed as long.
            check(since(unsafe {
                lib.tf_download_async(self.as_raw(), src.as_raw(), dst.as_mut_ptr().cast(), bytes)
            })?)?;
            self.finish(event, dst, src.device_use())
        })
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
        let bytes = std::mem::size_of_val::<[H::Elem]>(&src);
        capture_gate::async_copy(self, "Stream::upload_async", || {
            // SAFETY: as in download_async.
            check(since(unsafe {
                lib.tf_upload_async(self.as_raw(), src.as_ptr().cast(), dst.as_raw(), bytes)
            })?)?;
            self.finish(event, src, dst.device_use())
        })
    }

    /// Records `event` after the queued copy, and the use of the device
    /// memory when its buffer is another slot's.  If the event cannot be
    /// recorded the copy may run: wait for the stream before the memory can
    /// be dropped.
    fn finish<'d, H: PinnedMemory>(
        &self,
        event: Event,
        host: H,
        used: Option<DeviceUse<'_>>,
    ) -> Result<Transfer<'d, H>> {
        let recorded = self.runtime().record_uses([used]);
        if let Err(e) = recorded.and_then(|()| self.runtime().record_event(&event)) {
            if self.sync().is_err() {
                // The device's use cannot be bounded: never free the memory.
                std::mem::forget(host);
            }
            return Err(e);
        }
        Ok(Transfer { host: Some(host), event, _device: PhantomData })
    }
}
