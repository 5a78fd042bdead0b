// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Stream`]: one stream slot of a runtime, whichever thread uses it.

use std::fmt;
use std::os::raw::c_void;

use crate::cublas::{Gemm, GemmScalar};
use crate::error::{check, Error, Result};
use crate::kernels::{Function, KernelArg, LaunchConfig};
use crate::library::api;
use crate::memory::{AsDeviceSlice, AsDeviceSliceMut};
use crate::runtime::Runtime;
use crate::stream_work::{Event, PointerMode};
use crate::sys;

/// One stream slot of a [`Runtime`] (a handle from `tf_runtime_bind_slot`):
/// every transfer, enqueue and sync made through it uses that slot's CUDA
/// stream, from whichever OS thread it is made.
///
/// This is what code that can move between threads holds: an async task
/// (which an executor may resume on another worker thread after any
/// `.await`), a pool job, a thread handing work to another.  An upload on
/// one thread and a download on another through the same `Stream` are
/// ordered on one stream, so the download sees the upload.  Through a plain
/// [`Runtime`] they would use the two threads' slots, whose streams are not
/// ordered with each other.
///
/// ```no_run
/// use tenferro_gpu::Runtime;
///
/// let rt = Runtime::new(0)?;
/// let stream = rt.stream(0)?;
/// let mut x = stream.alloc::<f32>(4)?;          // freed on `stream` when dropped
/// stream.upload(&[1.0, 2.0, 3.0, 4.0], &mut x)?;
/// let tail = stream.to_vec(&x.slice(2..))?;      // after the upload, on the same stream
/// assert_eq!(tail, [3.0, 4.0]);
/// std::thread::spawn(move || stream.sync()).join().unwrap()?; // same stream there
/// # Ok::<(), tenferro_gpu::Error>(())
/// ```
///
/// `Clone` adds a reference (`tf_runtime_retain`); clones use the same
/// slot.  Every [`DeviceBuffer`](crate::DeviceBuffer) allocated on a stream
/// holds a clone and is freed on it.  [`Stream::runtime`] gives the bound
/// handle as a `Runtime`, whose every method then works on this slot.
///
/// Streams of different slots run concurrently; order them with
/// [`Stream::wait_for`] or an [`Event`].  Threads sharing one `Stream` share
/// its CUDA stream: their work is queued in the order the calls are made.
#[derive(Clone)]
pub struct Stream {
    handle: Runtime,
    slot: i32,
}

// Send + Sync come from `Runtime`'s (a bound handle is a runtime handle):
// the header lets any thread use a bound handle, threads using it at once
// share its slot, and each call serializes what it must on that slot.
// tests/suite/threads.rs asserts both.

impl Stream {
    pub(crate) fn bound(handle: Runtime, slot: i32) -> Stream {
        Stream { handle, slot }
    }

    /// The slot this stream uses.
    pub fn slot(&self) -> i32 {
        self.slot
    }

    /// The bound handle as a [`Runtime`]: all its methods work on this
    /// stream's slot (`stream.runtime().supports(...)`, ...).
    pub fn runtime(&self) -> &Runtime {
        &self.handle
    }

    /// The bound `tf_runtime *`, borrowed: valid while `self` lives.  Every
    /// C function given it uses this stream's slot.
    pub fn as_raw(&self) -> *mut sys::tf_runtime {
        self.handle.as_raw()
    }

    /// This slot's raw `CUstream`, for other CUDA libraries: work queued on
    /// it is ordered with this stream's work.  Valid while the runtime lives.
    pub fn cu_stream(&self) -> Result<*mut c_void> {
        self.handle.cu_stream()
    }

    /// Waits until the work queued on this stream is done, then runs the
    /// workspace retirements the device has passed (`tf_runtime_sync`).
    pub fn sync(&self) -> Result<()> {
        self.handle.sync()
    }

    /// Makes this stream wait, on the device, for the work queued on
    /// `other` before this call (`tf_slot_wait`); the host does not wait.
    /// `other` must be a stream of the same runtime (InvalidArgument
    /// otherwise).
    pub fn wait_for(&self, other: &Stream) -> Result<()> {
        if other.handle.identity()? != self.handle.identity()? {
            return Err(Error::invalid_argument(
                "Stream::wait_for",
                "the other stream belongs to another runtime; order them with an Event",
            ));
        }
        self.handle.slot_wait(other.slot)
    }

    /// A new [`Event`] in the runtime's primary context.
    pub fn event(&self) -> Result<Event> {
        self.handle.event()
    }
    /// Records `event` here: it completes when the work queued on this
    /// stream before the call is done.
    pub fn record_event(&self, event: &Event) -> Result<()> {
        self.handle.record_event(event)
    }
    /// Makes this stream wait, on the device, for the latest record of
    /// `event`.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.handle.wait_event(event)
    }

    /// [`Runtime::stream_enqueue`] on this stream: `f` gets its `CUstream`.
    pub fn stream_enqueue<F, R>(&self, f: F) -> Result<R>
    where
        F: FnOnce(*mut c_void) -> R,
    {
        self.handle.stream_enqueue(f)
    }
    /// [`Runtime::cublas_enqueue`] on this stream: `f` gets this slot's
    /// cuBLAS handle and `CUstream`.
    pub fn cublas_enqueue<F>(&self, mode: PointerMode, f: F) -> Result<()>
    where
        F: FnOnce(*mut c_void, *mut c_void) -> i32,
    {
        self.handle.cublas_enqueue(mode, f)
    }
    /// [`Runtime::with_context`]: `f` runs with the primary context current.
    pub fn with_context<F, R>(&self, f: F) -> Result<R>
    where
        F: FnOnce() -> R,
    {
        self.handle.with_context(f)
    }
    /// [`Runtime::retire`] on this stream: `release` runs once the device
    /// has passed the work queued here so far.
    pub fn retire<F>(&self, release: F) -> Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        self.handle.retire(release)
    }

    /// [`Runtime::gemm`] on this stream.
    pub fn gemm<T: GemmScalar>(
        &self,
        shape: &Gemm,
        alpha: T,
        a: &impl AsDeviceSlice<T>,
        b: &impl AsDeviceSlice<T>,
        beta: T,
        c: &mut impl AsDeviceSliceMut<T>,
    ) -> Result<()> {
        self.handle.gemm(shape, alpha, a, b, beta, c)
    }
    /// [`Runtime::matmul`] on this stream: row-major C = A B.
    pub fn matmul<T: GemmScalar + From<u8>>(
        &self,
        a: &impl AsDeviceSlice<T>,
        b: &impl AsDeviceSlice<T>,
        c: &mut impl AsDeviceSliceMut<T>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        self.handle.matmul(a, b, c, m, n, k)
    }

    /// [`Runtime::launch`] on this stream.
    ///
    /// # Safety
    /// As [`Runtime::launch`].
    pub unsafe fn launch(
        &self,
        function: &Function,
        config: &LaunchConfig,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        self.handle.launch(function, config, args)
    }

    /// `tf_free(ptr)` in order on this stream.
    pub(crate) fn free_raw(&self, ptr: u64) -> Result<()> {
        let lib = api()?;
        // SAFETY: a live bound handle; ptr came from tf_alloc (or 0).
        check(unsafe { lib.tf_free(self.as_raw(), ptr) })
    }

    /// Checks that `src` and `dst` hold as many values.
    pub(crate) fn same_len(src: usize, dst: usize, what: &str) -> Result<()> {
        if src == dst {
            return Ok(());
        }
        Err(Error::invalid_argument(
            what,
            &format!("the source holds {src} values, the destination {dst}"),
        ))
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream").field("slot", &self.slot).field("runtime", &self.handle).finish()
    }
}
