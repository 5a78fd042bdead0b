//! Device memory and transfers: [`DeviceBuffer`], uploads, downloads,
//! scalars and copies (include/tenferro_gpu.h, "Device memory and
//! transfers"; docs/transfers.md).
//!
//! Device memory is a [`DeviceBuffer<T>`] that owns its allocation, or a
//! device address (`u64`, a CUdeviceptr) that the caller owns; the library
//! checks every address range before it queues anything.  Work is queued
//! on the calling thread's stream slot after what is already queued there.

use std::marker::PhantomData;
use std::mem::size_of;
use std::os::raw::c_void;

use crate::error::{check, out_param, Error, Result};
use crate::runtime::Runtime;
use crate::sys;

/// Types whose values are plain bytes: every bit pattern is a valid value
/// and there is no padding, so device memory may be read into them.
///
/// # Safety
/// Implement it only for such types.
pub unsafe trait Plain: Copy + Send + Sync + 'static {}

macro_rules! plain {
    ($($t:ty),*) => { $(unsafe impl Plain for $t {})* };
}
plain!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

fn bytes<T: Plain>(len: usize, what: &str) -> Result<usize> {
    len.checked_mul(size_of::<T>())
        .ok_or_else(|| Error::invalid_argument(what, "the byte size overflows usize"))
}

/// `len` values of `T` of device memory from `tf_alloc`, owned: dropping it
/// frees it (`tf_free`) in order on the stream slot it was allocated from,
/// whichever thread drops it, so work queued there before still sees it;
/// work on other slots that uses it must be finished first (a
/// [`Runtime::slot_wait`], an [`crate::Event`], or a sync of that slot).
/// [`DeviceBuffer::retire`] frees it once the device has passed the work
/// queued so far on the calling thread's slot instead.
///
/// The buffer holds a reference to its runtime.  Its contents start
/// uninitialized (any bit pattern, which is a valid `T`).
pub struct DeviceBuffer<T: Plain> {
    rt: Runtime,
    ptr: u64,
    len: usize,
    slot: i32,
    _values: PhantomData<T>,
}

impl<T: Plain> DeviceBuffer<T> {
    /// The device address (0 for an empty buffer).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// The address field itself, for kernel arguments.
    pub(crate) fn ptr_ref(&self) -> &u64 {
        &self.ptr
    }
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.len * size_of::<T>()
    }
    /// The runtime the buffer was allocated through.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }
    /// The stream slot the buffer was allocated (and is freed) on.
    pub fn slot(&self) -> i32 {
        self.slot
    }

    fn range(&self, offset: usize, count: usize, what: &str) -> Result<u64> {
        match offset.checked_add(count) {
            Some(end) if end <= self.len => Ok(self.ptr + (offset * size_of::<T>()) as u64),
            _ => Err(Error::invalid_argument(
                what,
                &format!("{count} values at offset {offset} do not fit the {} of the buffer", self.len),
            )),
        }
    }

    /// Copies `src` into the buffer starting at value `offset`.
    pub fn upload_at(&mut self, offset: usize, src: &[T]) -> Result<()> {
        let dst = self.range(offset, src.len(), "DeviceBuffer::upload")?;
        self.rt.upload(src, dst)
    }
    /// Copies `src` into the start of the buffer.
    pub fn upload(&mut self, src: &[T]) -> Result<()> {
        self.upload_at(0, src)
    }
    /// Fills `dst` from value `offset` on, after the work queued on this
    /// thread's slot.
    pub fn download_at(&self, offset: usize, dst: &mut [T]) -> Result<()> {
        let src = self.range(offset, dst.len(), "DeviceBuffer::download")?;
        self.rt.download(src, dst)
    }
    /// Fills `dst` from the start of the buffer.
    pub fn download(&self, dst: &mut [T]) -> Result<()> {
        self.download_at(0, dst)
    }
    /// The whole buffer as a `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.len);
        // SAFETY: T is Plain (any bytes are a value); download writes all
        // of it before the Vec is read, and on failure the Vec is dropped.
        unsafe { out.set_len(self.len) };
        self.download(&mut out)?;
        Ok(out)
    }
    /// Copies all of `src` (of the same length) into this buffer on the
    /// device, queued on this thread's slot (`tf_copy`).
    pub fn copy_from(&mut self, src: &DeviceBuffer<T>) -> Result<()> {
        if src.len != self.len {
            return Err(Error::invalid_argument(
                "DeviceBuffer::copy_from",
                &format!("lengths differ: {} into {}", src.len, self.len),
            ));
        }
        self.rt.copy(src.ptr, self.ptr, self.byte_len())
    }

    /// Frees the memory now and reports the library's error (Drop ignores
    /// it; the memory is then leaked, never freed twice).
    pub fn free(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again but for moving its
        // runtime out, once.
        let rt = unsafe { std::ptr::read(&this.rt) };
        free_on_slot(&rt, this.ptr, this.slot)
    }

    /// Frees the memory once the device has passed the work queued so far
    /// on this thread's slot, without waiting ([`Runtime::retire`]).  The
    /// runtime stays alive until the release runs (a later sync, poll or
    /// retire on any of its handles).  On an error other than
    /// InvalidArgument the memory is leaked, as the device may still use it.
    pub fn retire(self) -> Result<()> {
        let rt = self.rt.clone();
        rt.retire(move || drop(self))
    }
}

/// `tf_free(ptr)` ordered on stream slot `slot` of `rt`.
fn free_on_slot(rt: &Runtime, ptr: u64, slot: i32) -> Result<()> {
    if rt.current_slot()? == slot {
        // SAFETY: a live handle; ptr came from tf_alloc.
        return check(unsafe { sys::tf_free(rt.as_raw(), ptr) });
    }
    let bound = rt.bind_slot(slot)?;
    // SAFETY: as above.
    check(unsafe { sys::tf_free(bound.as_raw(), ptr) })
}

impl<T: Plain> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let _ = free_on_slot(&self.rt, self.ptr, self.slot);
    }
}

impl<T: Plain> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("slot", &self.slot)
            .finish()
    }
}

impl Runtime {
    /// A [`DeviceBuffer`] of `len` values (`tf_alloc`), in order on this
    /// thread's slot.  Errors: OutOfMemory, InvalidArgument (the size
    /// overflows), DeviceFault, Cuda.
    pub fn alloc<T: Plain>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let n = bytes::<T>(len, "Runtime::alloc")?;
        let rt = self.clone();
        let slot = rt.current_slot()?;
        // SAFETY: a live handle and a valid out pointer.
        let ptr = out_param(|out| unsafe { sys::tf_alloc(rt.as_raw(), n, out) })?;
        Ok(DeviceBuffer { rt, ptr, len, slot, _values: PhantomData })
    }

    /// Copies `src` to device memory at `dst` (`tf_upload`); `src` may be
    /// reused on return, later work on this slot sees the data.
    pub fn upload<T: Plain>(&self, src: &[T], dst: u64) -> Result<()> {
        let n = bytes::<T>(src.len(), "Runtime::upload")?;
        // SAFETY: src is readable for n bytes during the call.
        check(unsafe { sys::tf_upload(self.as_raw(), src.as_ptr().cast(), dst, n) })
    }

    /// Fills `dst` from device memory at `src` after the work queued on
    /// this slot (`tf_download`).  On failure `dst` may be partly written.
    pub fn download<T: Plain>(&self, src: u64, dst: &mut [T]) -> Result<()> {
        let n = bytes::<T>(dst.len(), "Runtime::download")?;
        // SAFETY: dst is writable for n bytes, and any bytes are a T.  A
        // Rust slice is pageable memory unless the caller registered it
        // with CUDA: then no device write can outlive the call.
        check(unsafe { sys::tf_download(self.as_raw(), src, dst.as_mut_ptr().cast(), n) })
    }

    /// Reads one small value (at most 16 bytes) at `src` after the work
    /// queued on this slot (`tf_download_scalar`).
    pub fn download_scalar<T: Plain>(&self, src: u64) -> Result<T> {
        if size_of::<T>() > sys::TF_SCALAR_DOWNLOAD_MAX_BYTES {
            return Err(Error::invalid_argument(
                "Runtime::download_scalar",
                &format!("a {}-byte value is over the 16-byte limit", size_of::<T>()),
            ));
        }
        let mut value = std::mem::MaybeUninit::<T>::zeroed();
        // SAFETY: value is writable for size_of::<T>() bytes.
        check(unsafe {
            sys::tf_download_scalar(
                self.as_raw(),
                src,
                value.as_mut_ptr().cast::<c_void>(),
                size_of::<T>(),
            )
        })?;
        // SAFETY: written on TF_OK; any bytes are a T.
        Ok(unsafe { value.assume_init() })
    }

    /// Copies `len` bytes of device memory from `src` to `dst` (both of
    /// this runtime's device, not overlapping), queued on this slot
    /// (`tf_copy`).
    pub fn copy(&self, src: u64, dst: u64, len: usize) -> Result<()> {
        // SAFETY: the library checks both device ranges.
        check(unsafe { sys::tf_copy(self.as_raw(), src, dst, len) })
    }

    /// Whether copies from this runtime's device to `dst_rt`'s run
    /// directly (`tf_peer_copy_available`); true on one device.
    pub fn peer_copy_available(&self, dst_rt: &Runtime) -> Result<bool> {
        // SAFETY: live handles and a valid out pointer.
        let yes = out_param(|out| unsafe {
            sys::tf_peer_copy_available(self.as_raw(), dst_rt.as_raw(), out)
        })?;
        Ok(yes != 0)
    }

    /// Copies `len` bytes from `src` on this runtime's device to `dst` on
    /// `dst_rt`'s, queued on this thread's slot of this runtime
    /// (`tf_peer_copy`).  `dst_rt`'s streams do not wait: sync this slot
    /// before work there uses `dst`.
    pub fn peer_copy(&self, src: u64, dst_rt: &Runtime, dst: u64, len: usize) -> Result<()> {
        // SAFETY: the library checks both device ranges.
        check(unsafe { sys::tf_peer_copy(self.as_raw(), src, dst_rt.as_raw(), dst, len) })
    }
}
