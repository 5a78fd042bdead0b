// SPDX-License-Identifier: MIT OR Apache-2.0
//! Allocations and transfers (include/tenferro_gpu.h, "Device memory and
//! transfers"; docs/transfers.md): typed, on a [`Stream`], between host
//! slices and [`DeviceBuffer`]s or their views; and by raw device address
//! on a [`Runtime`] (the calling thread's slot), for interop.
//!
//! Every typed transfer checks lengths before anything is queued and moves
//! exactly `len * size_of::<T>()` bytes; the library checks every device
//! address range.

use std::mem::size_of;
use std::os::raw::c_void;

use crate::error::{check, out_param, Error, Result};
use crate::library::api;
use crate::memory::{byte_len, AsDeviceSlice, AsDeviceSliceMut, DeviceBuffer, DeviceRepr};
use crate::pending_copies;
use crate::runtime::Runtime;
use crate::stream::Stream;
use crate::sys;

impl Stream {
    /// A [`DeviceBuffer`] of `len` values (`tf_alloc`), in order on this
    /// stream, which also frees it.  Errors: OutOfMemory, InvalidArgument
    /// (the size overflows), DeviceFault, Cuda.
    pub fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>(len, "Stream::alloc")?;
        let lib = api()?;
        // SAFETY: a live handle and a valid out pointer.
        let ptr = out_param(|out| unsafe { lib.tf_alloc(self.as_raw(), bytes, out) })?;
        Ok(DeviceBuffer::owned(self.clone(), ptr, len))
    }

    /// A [`DeviceBuffer`] holding a copy of `src`, allocated and uploaded on
    /// this stream.
    pub fn alloc_from<T: DeviceRepr>(&self, src: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buffer = self.alloc(src.len())?;
        self.upload(src, &mut buffer)?;
        Ok(buffer)
    }

    /// Copies `src` into `dst` (of the same length), queued on this stream
    /// (`tf_upload`); `src` may be reused on return, later work on this
    /// stream sees the data.  On failure a page-locked `src` may still be
    /// read until a sync of the stream succeeds: its owner waits for that
    /// before it lets go.
    pub fn upload<T: DeviceRepr>(
        &self,
        src: &[T],
        dst: &mut impl AsDeviceSliceMut<T>,
    ) -> Result<()> {
        let dst = dst.as_device_slice_mut();
        Stream::same_len(src.len(), dst.len(), "Stream::upload")?;
        self.runtime().upload(src, dst.as_raw())?;
        self.runtime().record_uses([dst.device_use()])
    }

    /// Fills `dst` from `src` (of the same length) after the work queued on
    /// this stream (`tf_download`).  On failure `dst` may be partly written,
    /// a page-locked one still by the device ([`Runtime::download`]).
    pub fn download<T: DeviceRepr>(
        &self,
        src: &impl AsDeviceSlice<T>,
        dst: &mut [T],
    ) -> Result<()> {
        let src = src.as_device_slice();
        Stream::same_len(src.len(), dst.len(), "Stream::download")?;
        self.runtime().download(src.as_raw(), dst)
    }

    /// `src`'s values as a `Vec`, after the work queued on this stream.
    pub fn to_vec<T: DeviceRepr>(&self, src: &impl AsDeviceSlice<T>) -> Result<Vec<T>> {
        let src = src.as_device_slice();
        let mut out = Vec::with_capacity(src.len());
        // SAFETY: the Vec's spare capacity holds src.len() values; the
        // library writes all of their bytes on TF_OK, and any bytes are a T
        // (DeviceRepr), so they are initialised before the length covers
        // them.  No reference to the uninitialised values is made.
        unsafe {
            self.runtime().download_raw(src.as_raw(), out.as_mut_ptr(), src.len())?;
            out.set_len(src.len());
        }
        Ok(out)
    }

    /// The one value `src` holds (a view of length 1, at most
    /// [`sys::TF_SCALAR_DOWNLOAD_MAX_BYTES`] bytes), after the work queued
    /// on this stream (`tf_download_scalar`: the fast path for a flag or a
    /// reduction's result).
    pub fn download_scalar<T: DeviceRepr>(&self, src: &impl AsDeviceSlice<T>) -> Result<T> {
        let src = src.as_device_slice();
        Stream::same_len(src.len(), 1, "Stream::download_scalar")?;
        self.runtime().download_scalar(src.as_raw())
    }

    /// Copies `src` into `dst` (same length, both of this runtime's device,
    /// not overlapping), queued on this stream (`tf_copy`).
    pub fn copy<T: DeviceRepr>(
        &self,
        src: &impl AsDeviceSlice<T>,
        dst: &mut impl AsDeviceSliceMut<T>,
    ) -> Result<()> {
        let (src, dst) = (src.as_device_slice(), dst.as_device_slice_mut());
        Stream::same_len(src.len(), dst.len(), "Stream::copy")?;
        self.runtime().copy(src.as_raw(), dst.as_raw(), src.byte_len())?;
        self.runtime().record_uses([src.device_use(), dst.device_use()])
    }

    /// Copies `src` (this runtime's device) into `dst` (of the same length)
    /// on the device of `dst`'s stream, queued on this stream
    /// (`tf_peer_copy`).  `dst`'s stream does not wait for it: sync this
    /// stream (or record an [`Event`](crate::Event) here and wait for it
    /// there) before work there uses `dst`, and, when `dst` is on another
    /// device, before `dst` is dropped (its use is recorded only on one
    /// device: docs/rust.md, "Lifetime rules").
    pub fn peer_copy<T: DeviceRepr>(
        &self,
        src: &impl AsDeviceSlice<T>,
        dst: &mut impl AsDeviceSliceMut<T>,
    ) -> Result<()> {
        let (src, dst) = (src.as_device_slice(), dst.as_device_slice_mut());
        Stream::same_len(src.len(), dst.len(), "Stream::peer_copy")?;
        let dst_rt = dst.stream().runtime();
        self.runtime().peer_copy(src.as_raw(), dst_rt, dst.as_raw(), src.byte_len())?;
        // A slot records uses of its own device's memory only.
        let same_device = self.runtime().primary_context()? == dst_rt.primary_context()?;
        self.runtime().record_uses([src.device_use(), dst.device_use().filter(|_| same_device)])
    }
}

impl Runtime {
    /// A [`DeviceBuffer`] of `len` values on a [`Stream`] of the calling
    /// thread's current slot ([`Runtime::current_stream`]), which also frees
    /// it.  Prefer [`Stream::alloc`] where work can move between threads.
    pub fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.current_stream()?.alloc(len)
    }

    /// Copies `src` to device memory at the raw address `dst` (`tf_upload`),
    /// on the calling thread's slot (a bound handle's slot); `src` may be
    /// reused on return.  The library checks the device range.
    pub fn upload<T: DeviceRepr>(&self, src: &[T], dst: u64) -> Result<()> {
        let n = byte_len::<T>(src.len(), "Runtime::upload")?;
        let lib = api()?;
        // SAFETY: src is readable for n bytes during the call.
        let status = unsafe { lib.tf_upload(self.as_raw(), src.as_ptr().cast(), dst, n) };
        let result = check(status);
        // A page-locked src may still be read (pending_copies.rs).
        pending_copies::after_failed_copy(self, src.as_ptr().cast(), n, status);
        result
    }

    /// Fills `dst` from device memory at the raw address `src` after the
    /// work queued on the calling thread's slot (`tf_download`).  On failure
    /// `dst` may be partly written, and a page-locked one (a [`HostBuffer`]
    /// or a registration) may still be written by the device until a sync
    /// of the slot succeeds: its owner waits for that before it lets go.
    ///
    /// [`HostBuffer`]: crate::HostBuffer
    pub fn download<T: DeviceRepr>(&self, src: u64, dst: &mut [T]) -> Result<()> {
        let n = byte_len::<T>(dst.len(), "Runtime::download")?;
        // SAFETY: dst is writable for its length.
        let status = unsafe { self.tf_download(src, dst.as_mut_ptr().cast(), n) }?;
        let result = check(status);
        pending_copies::after_failed_copy(self, dst.as_ptr().cast(), n, status);
        result
    }

    /// `tf_download` of `len` values into fresh (pageable) memory at `dst`.
    ///
    /// # Safety
    /// `dst` must be writable for `len` values of `T`; they need not be
    /// initialised (any bytes are a T).
    pub(crate) unsafe fn download_raw<T: DeviceRepr>(
        &self,
        src: u64,
        dst: *mut T,
        len: usize,
    ) -> Result<()> {
        let n = byte_len::<T>(len, "Runtime::download")?;
        // Memory the caller has not seen yet is pageable: no device write
        // outlives the call.
        check(self.tf_download(src, dst.cast(), n)?)
    }

    /// The status of `tf_download` of `n` bytes into `dst`.
    ///
    /// # Safety
    /// `dst` must be writable for `n` bytes.
    unsafe fn tf_download(&self, src: u64, dst: *mut c_void, n: usize) -> Result<sys::tf_status> {
        Ok(api()?.tf_download(self.as_raw(), src, dst, n))
    }

    /// Reads one small value (at most [`sys::TF_SCALAR_DOWNLOAD_MAX_BYTES`]
    /// bytes) at the raw address `src` after the work queued on the calling
    /// thread's slot (`tf_download_scalar`).
    pub fn download_scalar<T: DeviceRepr>(&self, src: u64) -> Result<T> {
        if size_of::<T>() > sys::TF_SCALAR_DOWNLOAD_MAX_BYTES {
            return Err(Error::invalid_argument(
                "Runtime::download_scalar",
                &format!(
                    "a {}-byte value is over the {}-byte limit",
                    size_of::<T>(),
                    sys::TF_SCALAR_DOWNLOAD_MAX_BYTES
                ),
            ));
        }
        let lib = api()?;
        let mut value = std::mem::MaybeUninit::<T>::zeroed();
        // SAFETY: value is writable for size_of::<T>() bytes.
        check(unsafe {
            lib.tf_download_scalar(
                self.as_raw(),
                src,
                value.as_mut_ptr().cast::<c_void>(),
                size_of::<T>(),
            )
        })?;
        // SAFETY: written on TF_OK; any bytes are a T.
        Ok(unsafe { value.assume_init() })
    }

    /// Copies `len` bytes of device memory from the raw address `src` to
    /// `dst` (both of this runtime's device, not overlapping), queued on the
    /// calling thread's slot (`tf_copy`).
    pub fn copy(&self, src: u64, dst: u64, len: usize) -> Result<()> {
        let lib = api()?;
        // SAFETY: the library checks both device ranges.
        check(unsafe { lib.tf_copy(self.as_raw(), src, dst, len) })
    }

    /// Whether copies from this runtime's device to `dst_rt`'s run
    /// directly (`tf_peer_copy_available`); true on one device.
    pub fn peer_copy_available(&self, dst_rt: &Runtime) -> Result<bool> {
        let lib = api()?;
        // SAFETY: live handles and a valid out pointer.
        let yes = out_param(|out| unsafe {
            lib.tf_peer_copy_available(self.as_raw(), dst_rt.as_raw(), out)
        })?;
        Ok(yes != 0)
    }

    /// Copies `len` bytes from the raw address `src` on this runtime's
    /// device to `dst` on `dst_rt`'s, queued on the calling thread's slot of
    /// this runtime (`tf_peer_copy`).  `dst_rt`'s streams do not wait: sync
    /// this slot before work there uses `dst`.
    pub fn peer_copy(&self, src: u64, dst_rt: &Runtime, dst: u64, len: usize) -> Result<()> {
        let lib = api()?;
        // SAFETY: the library checks both device ranges.
        check(unsafe { lib.tf_peer_copy(self.as_raw(), src, dst_rt.as_raw(), dst, len) })
    }
}
