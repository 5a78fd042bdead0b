// SPDX-License-Identifier: MIT OR Apache-2.0
//! Device memory as typed slices: [`DeviceBuffer<T>`] owns an allocation,
//! [`DeviceSlice`] and [`DeviceSliceMut`] borrow a range of one, as `Vec<T>`,
//! `&[T]` and `&mut [T]` do on the host.  Element types are [`DeviceRepr`]:
//! plain numbers, so every transfer copies exactly `len * size_of::<T>()`
//! bytes and any bytes the device holds are a valid `T`.
//!
//! A buffer belongs to the [`Stream`] it was allocated on: it is freed on
//! that stream (in order after the work queued there), and its own methods
//! (`upload`, `to_vec`, ...) run there too.  The borrow checker keeps views
//! from outliving their buffer and a mutable view from coexisting with any
//! other view of it (see "What does not compile" below).
//!
//! # Threads
//!
//! A `DeviceBuffer<T>` is `Send` and `Sync`; views are `Send` and `Sync`
//! like the references they mirror.  Each holds (or borrows) a [`Stream`],
//! whose handle the C library lets any thread use; a buffer is freed by
//! `tf_free` on its own stream from whichever thread drops it, which the
//! library allows.  `&DeviceBuffer` only reads device memory (downloads,
//! copies from it), and writes need `&mut`, so sharing a buffer between
//! threads races no more than sharing a `&[T]` does.  Work this crate
//! queues with a buffer on another slot's stream records that use, so the
//! buffer's free waits for it on the device (recorded_use.rs); what the
//! types do not order is work you queue on another stream yourself: record
//! it ([`DeviceBuffer::record_use`]) or finish it (or wait for it with
//! [`Stream::wait_for`] or an [`Event`](crate::Event)) before the buffer is
//! dropped or reused, as with any CUDA allocation.
//!
//! # What does not compile
//!
//! A view cannot outlive its buffer:
//!
//! ```compile_fail,E0515
//! # use tenferro_gpu::{DeviceSlice, Stream};
//! fn dangling(stream: &Stream) -> DeviceSlice<'static, f32> {
//!     let buffer = stream.alloc::<f32>(4).unwrap();
//!     buffer.slice(..) // `buffer` is dropped here while still borrowed
//! }
//! ```
//!
//! A mutable view excludes every other view of the same buffer:
//!
//! ```compile_fail,E0502
//! # use tenferro_gpu::Stream;
//! # fn f(stream: &Stream) -> tenferro_gpu::Result<()> {
//! let mut buffer = stream.alloc::<f32>(4)?;
//! let read = buffer.slice(0..2);
//! let write = buffer.slice_mut(2..4); // `buffer` is already borrowed
//! stream.copy(&read, &mut { write })?;
//! # Ok(()) }
//! ```
//!
//! Element types must be [`DeviceRepr`]; a `bool` is not (most bytes are not
//! a valid `bool`):
//!
//! ```compile_fail,E0277
//! # use tenferro_gpu::Stream;
//! # fn f(stream: &Stream) {
//! let flags = stream.alloc::<bool>(4);
//! # }
//! ```

use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::{Bound, RangeBounds};

use crate::error::{Error, Result};
use crate::recorded_use::DeviceUse;
use crate::retirement::{free_in_release, Retired};
use crate::runtime::Capability;
use crate::stream::Stream;

/// Element types of device memory: plain numbers (and arrays of them),
/// whose every bit pattern is a valid value and which have no padding, so
/// that uploads and downloads copy exactly `size_of::<T>()` bytes per value
/// and a download can never produce an invalid value.
///
/// Implemented for `u8`..`u128`, `i8`..`i128`, `usize`, `isize`, `f32`,
/// `f64` and `[T; N]` of those.
///
/// # Safety
/// Implement it only for `Copy` types without padding bytes for which every
/// bit pattern of `size_of::<T>()` bytes is a valid value (a `#[repr(C)]`
/// struct of such fields with no padding between or after them qualifies;
/// `bool`, `char`, references and enums do not).
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static {}

macro_rules! device_repr {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number: no padding, every bit pattern valid.
        unsafe impl DeviceRepr for $t {}
    )* };
}
device_repr!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);
// SAFETY: an array of such values has no padding between its elements.
unsafe impl<T: DeviceRepr, const N: usize> DeviceRepr for [T; N] {}

/// Bytes of `len` values of `T`, or an InvalidArgument naming `what`.
pub(crate) fn byte_len<T>(len: usize, what: &str) -> Result<usize> {
    len.checked_mul(size_of::<T>())
        .ok_or_else(|| Error::invalid_argument(what, "the byte size overflows usize"))
}

/// `(start, end)` of `range` within `0..len`, or `None`.
fn bounds(range: impl RangeBounds<usize>, len: usize) -> Option<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    (start <= end && end <= len).then_some((start, end))
}

fn out_of_range(start: Bound<&usize>, end: Bound<&usize>, len: usize) -> ! {
    panic!("tenferro-gpu: range ({start:?}, {end:?}) is out of bounds of a device slice of length {len}")
}

fn offset<T>(ptr: u64, start: usize) -> u64 {
    ptr + (start * size_of::<T>()) as u64
}

/// `len` values of `T` of device memory from `tf_alloc`, owned, like a
/// `Vec<T>` on the device.
///
/// Dropping it frees it (`tf_free`) in order on the [`Stream`] it was
/// allocated on, whichever thread drops it, so work queued there before
/// still sees it, and so does work this crate queued with it on other
/// slots (their uses are recorded); [`DeviceBuffer::free`] does the same and reports an
/// error, [`DeviceBuffer::retire`] frees it once the device has passed the
/// work queued so far, without waiting.  The buffer holds a reference to
/// its stream (and so to the runtime).  Its contents start uninitialized:
/// any bit pattern, which is a valid `T`.
pub struct DeviceBuffer<T: DeviceRepr> {
    stream: Stream,
    ptr: u64,
    len: usize,
    _values: PhantomData<T>,
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    pub(crate) fn owned(stream: Stream, ptr: u64, len: usize) -> Self {
        DeviceBuffer { stream, ptr, len, _values: PhantomData }
    }

    /// Takes ownership of `len` values at device address `ptr`, to be freed
    /// on `stream`.
    ///
    /// # Safety
    /// `ptr` must be the start of an allocation from `tf_alloc` of
    /// `stream`'s device holding at least `len` values of `T`, owned by
    /// nothing else (it will be freed once).
    pub unsafe fn from_raw(stream: &Stream, ptr: u64, len: usize) -> Self {
        Self::owned(stream.clone(), ptr, len)
    }

    /// Gives up ownership without freeing; returns the device address.
    pub fn into_raw(self) -> u64 {
        self.into_parts().1
    }

    /// The stream and the address, without freeing.
    fn into_parts(self) -> (Stream, u64) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again but for its stream,
        // moved out once here.
        (unsafe { std::ptr::read(&this.stream) }, this.ptr)
    }

    /// The device address (a `CUdeviceptr`; 0 for an empty buffer), for
    /// other CUDA libraries.  Valid while the buffer lives.
    pub fn as_raw(&self) -> u64 {
        self.ptr
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
    /// The stream the buffer was allocated on and is freed on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The whole buffer, borrowed.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        let (ptr, len, stream) = (self.ptr, self.len, &self.stream);
        DeviceSlice { ptr, len, stream, tracked: true, _values: PhantomData }
    }
    /// The whole buffer, borrowed mutably.
    pub fn as_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        let (ptr, len, stream) = (self.ptr, self.len, &self.stream);
        DeviceSliceMut { ptr, len, stream, tracked: true, _values: PhantomData }
    }
    /// The values in `range`; panics if it is out of bounds, as slicing does.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> DeviceSlice<'_, T> {
        self.as_slice().narrowed(range)
    }
    /// The values in `range`, or `None` if it is out of bounds.
    pub fn try_slice(&self, range: impl RangeBounds<usize>) -> Option<DeviceSlice<'_, T>> {
        self.as_slice().try_narrowed(range)
    }
    /// The values in `range`, mutably; panics if it is out of bounds.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> DeviceSliceMut<'_, T> {
        self.as_slice_mut().narrowed(range)
    }
    /// The values in `range`, mutably, or `None` if it is out of bounds.
    pub fn try_slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> Option<DeviceSliceMut<'_, T>> {
        self.as_slice_mut().try_narrowed(range)
    }

    /// Copies `src` (of the buffer's length) into the buffer, on the
    /// buffer's stream.  `src` may be reused on return.
    pub fn upload(&mut self, src: &[T]) -> Result<()> {
        self.as_slice_mut().upload(src)
    }
    /// Fills `dst` (of the buffer's length) after the work queued on the
    /// buffer's stream.
    pub fn download(&self, dst: &mut [T]) -> Result<()> {
        self.as_slice().download(dst)
    }
    /// The whole buffer as a `Vec`, after the work queued on its stream.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.as_slice().to_vec()
    }
    /// Copies `src` (of the same length) into this buffer on the device,
    /// queued on this buffer's stream (`tf_copy`).
    pub fn copy_from(&mut self, src: &impl AsDeviceSlice<T>) -> Result<()> {
        self.as_slice_mut().copy_from(src)
    }

    /// Frees the memory now, on its stream, and reports the library's error
    /// (Drop ignores it; the memory is then leaked, never freed twice).
    pub fn free(self) -> Result<()> {
        let (stream, ptr) = self.into_parts();
        stream.free_raw(ptr)
    }

    /// Frees the memory once the device has passed the work queued so far
    /// on the buffer's stream, without waiting.  With stream-ordered
    /// allocation ([`Capability::StreamOrderedAlloc`]) that is what
    /// [`DeviceBuffer::free`] does; otherwise the free is a retirement
    /// ([`Stream::retire`]), run by a later sync, poll or retire of the
    /// runtime, or at its teardown, when the memory goes with the primary
    /// context.  The pending free holds no reference to the runtime, so
    /// dropping every handle still tears it down.  On an error other than
    /// InvalidArgument and InvalidHandle the memory is leaked, as the
    /// device may still use it.
    ///
    /// [`Capability::StreamOrderedAlloc`]: crate::Capability::StreamOrderedAlloc
    pub fn retire(self) -> Result<()> {
        let runtime = self.stream.runtime();
        if self.ptr == 0 || runtime.supports(Capability::StreamOrderedAlloc)? {
            return self.free(); // ordered on the stream, and never waits
        }
        let identity = runtime.identity()?;
        let (stream, ptr) = self.into_parts();
        let release = Box::new(move || free_in_release(identity, ptr));
        match stream.runtime().retire_boxed(release) {
            (Retired::Refused, Err(e)) => stream.free_raw(ptr).and(Err(e)),
            (_, result) => result,
        }
    }
}

impl<T: DeviceRepr> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let _ = self.stream.free_raw(self.ptr);
    }
}

impl<T: DeviceRepr> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("slot", &self.stream.slot())
            .finish()
    }
}

/// A borrowed range of device memory, like `&[T]`: from
/// [`DeviceBuffer::slice`] and friends.  `Copy`; it cannot outlive its
/// buffer.  Its own methods run on its buffer's stream.
#[derive(Clone, Copy)]
pub struct DeviceSlice<'a, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    stream: &'a Stream,
    /// Memory of a [`DeviceBuffer`] freed on `stream`, whose uses on other
    /// slots the crate records (recorded_use.rs); not for `from_raw` views.
    tracked: bool,
    _values: PhantomData<&'a [T]>,
}

/// A mutably borrowed range of device memory, like `&mut [T]`: from
/// [`DeviceBuffer::slice_mut`] and friends.  While it lives no other view
/// of the same buffer does.  Its own methods run on its buffer's stream.
pub struct DeviceSliceMut<'a, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    stream: &'a Stream,
    /// As for [`DeviceSlice`].
    tracked: bool,
    _values: PhantomData<&'a mut [T]>,
}

impl<'a, T: DeviceRepr> DeviceSlice<'a, T> {
    /// A view of `len` values at `ptr`, to be used with `stream`.
    ///
    /// # Safety
    /// `ptr .. ptr + len * size_of::<T>()` must be device memory of
    /// `stream`'s device that stays allocated, and that nothing writes
    /// through another handle, for `'a`.
    pub unsafe fn from_raw(stream: &'a Stream, ptr: u64, len: usize) -> Self {
        DeviceSlice { ptr, len, stream, tracked: false, _values: PhantomData }
    }
    /// The values in `range` of this view; panics if it is out of bounds.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> DeviceSlice<'a, T> {
        self.narrowed(range)
    }
    /// The values in `range` of this view, or `None` if out of bounds.
    pub fn try_slice(&self, range: impl RangeBounds<usize>) -> Option<DeviceSlice<'a, T>> {
        self.try_narrowed(range)
    }
    /// Fills `dst` (of the view's length) after the work queued on the
    /// view's stream.
    pub fn download(&self, dst: &mut [T]) -> Result<()> {
        self.stream.download(self, dst)
    }
    /// The view's values as a `Vec`, after the work queued on its stream.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.stream.to_vec(self)
    }
}

impl<'a, T: DeviceRepr> DeviceSliceMut<'a, T> {
    /// A mutable view of `len` values at `ptr`, to be used with `stream`.
    ///
    /// # Safety
    /// As [`DeviceSlice::from_raw`], and nothing else reads or writes the
    /// range through another handle for `'a`.
    pub unsafe fn from_raw(stream: &'a Stream, ptr: u64, len: usize) -> Self {
        DeviceSliceMut { ptr, len, stream, tracked: false, _values: PhantomData }
    }
    /// This view, read-only, for as long as it is borrowed.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        let (ptr, len, stream, tracked) = (self.ptr, self.len, self.stream, self.tracked);
        DeviceSlice { ptr, len, stream, tracked, _values: PhantomData }
    }
    /// The values in `range` of this view, mutably, for as long as this
    /// view is borrowed; panics if it is out of bounds.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> DeviceSliceMut<'_, T> {
        self.reborrow().narrowed(range)
    }
    /// As [`DeviceSliceMut::slice_mut`], or `None` if out of bounds.
    pub fn try_slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> Option<DeviceSliceMut<'_, T>> {
        self.reborrow().try_narrowed(range)
    }
    /// Splits the view into `[0, mid)` and `[mid, len)`; panics if `mid` is
    /// past the end, as `<[T]>::split_at_mut` does.
    pub fn split_at_mut(self, mid: usize) -> (DeviceSliceMut<'a, T>, DeviceSliceMut<'a, T>) {
        assert!(
            mid <= self.len,
            "tenferro-gpu: split at {mid} of a device slice of length {}",
            self.len
        );
        let tail = DeviceSliceMut { ptr: offset::<T>(self.ptr, mid), len: self.len - mid, ..self };
        (DeviceSliceMut { len: mid, ..self }, tail)
    }
    fn reborrow(&mut self) -> DeviceSliceMut<'_, T> {
        let (ptr, len, stream, tracked) = (self.ptr, self.len, self.stream, self.tracked);
        DeviceSliceMut { ptr, len, stream, tracked, _values: PhantomData }
    }
    /// Copies `src` (of the view's length) into the view, on the view's
    /// stream.  `src` may be reused on return.
    pub fn upload(&mut self, src: &[T]) -> Result<()> {
        let stream = self.stream;
        stream.upload(src, self)
    }
    /// Copies `src` (of the same length) into this view on the device,
    /// queued on this view's stream (`tf_copy`).
    pub fn copy_from(&mut self, src: &impl AsDeviceSlice<T>) -> Result<()> {
        let stream = self.stream;
        stream.copy(src, self)
    }
}

/// Device memory that can be read as a [`DeviceSlice`]: buffers and both
/// kinds of views.  What the typed transfers of [`Stream`] take as sources.
pub trait AsDeviceSlice<T: DeviceRepr> {
    fn as_device_slice(&self) -> DeviceSlice<'_, T>;
}

/// Device memory that can be written as a [`DeviceSliceMut`]: buffers and
/// mutable views.  What the typed transfers of [`Stream`] take as
/// destinations.
pub trait AsDeviceSliceMut<T: DeviceRepr>: AsDeviceSlice<T> {
    fn as_device_slice_mut(&mut self) -> DeviceSliceMut<'_, T>;
}

impl<T: DeviceRepr> AsDeviceSlice<T> for DeviceBuffer<T> {
    fn as_device_slice(&self) -> DeviceSlice<'_, T> {
        self.as_slice()
    }
}
impl<T: DeviceRepr> AsDeviceSliceMut<T> for DeviceBuffer<T> {
    fn as_device_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        self.as_slice_mut()
    }
}
impl<T: DeviceRepr> AsDeviceSlice<T> for DeviceSlice<'_, T> {
    fn as_device_slice(&self) -> DeviceSlice<'_, T> {
        *self
    }
}
impl<T: DeviceRepr> AsDeviceSlice<T> for DeviceSliceMut<'_, T> {
    fn as_device_slice(&self) -> DeviceSlice<'_, T> {
        self.as_slice()
    }
}
impl<T: DeviceRepr> AsDeviceSliceMut<T> for DeviceSliceMut<'_, T> {
    fn as_device_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        self.reborrow()
    }
}

/// The address field of device memory, for kernel arguments: it lives as
/// long as the value.
pub(crate) trait AddressField {
    fn address_field(&self) -> &u64;
}
impl<T: DeviceRepr> AddressField for DeviceBuffer<T> {
    fn address_field(&self) -> &u64 {
        &self.ptr
    }
}

/// What both views share: address, length and stream, narrowing to a
/// range, Debug, and the address field kernel arguments point at.
macro_rules! view_common {
    ($view:ident) => {
        impl<'a, T: DeviceRepr> $view<'a, T> {
            /// The device address of the first value.
            pub fn as_raw(&self) -> u64 {
                self.ptr
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
            /// The stream of the buffer this view borrows.
            pub fn stream(&self) -> &'a Stream {
                self.stream
            }
            /// The use of a buffer's memory a call records on another slot
            /// (recorded_use.rs): none when empty or made with `from_raw`.
            pub(crate) fn device_use(&self) -> Option<DeviceUse<'a>> {
                (self.tracked && self.len > 0).then_some(DeviceUse { ptr: self.ptr, owner: self.stream })
            }
            /// The values in `range` of this view, or `None` if out of bounds.
            fn try_narrowed(self, range: impl RangeBounds<usize>) -> Option<Self> {
                let (start, end) = bounds(range, self.len)?;
                Some($view { ptr: offset::<T>(self.ptr, start), len: end - start, ..self })
            }
            /// As `try_narrowed`, panicking as slicing does.
            fn narrowed(self, range: impl RangeBounds<usize>) -> Self {
                let (start, end) = (range.start_bound().cloned(), range.end_bound().cloned());
                let len = self.len;
                self.try_narrowed((start, end))
                    .unwrap_or_else(|| out_of_range(start.as_ref(), end.as_ref(), len))
            }
        }

        impl<T: DeviceRepr> std::fmt::Debug for $view<'_, T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($view))
                    .field("ptr", &format_args!("{:#x}", self.ptr))
                    .field("len", &self.len)
                    .finish()
            }
        }

        impl<T: DeviceRepr> AddressField for $view<'_, T> {
            fn address_field(&self) -> &u64 {
                &self.ptr
            }
        }
    };
}
view_common!(DeviceSlice);
view_common!(DeviceSliceMut);
