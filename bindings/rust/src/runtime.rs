// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Runtime`]: one device's primary context, its stream slots and what
//! hangs off them.

use std::fmt;
use std::os::raw::c_void;
use std::ptr::NonNull;

use crate::callback::{with_context_trampoline, Frame};
use crate::device::DeviceProperties;
use crate::error::{check, out_param, Result};
use crate::library::{api, defaults};
use crate::pending_copies;
use crate::retirement::running_releases;
use crate::stream::Stream;
use crate::sys;

/// Options of [`Runtime::with_options`], starting at the library's
/// defaults (`tf_runtime_options_init`):
///
/// ```no_run
/// # use tenferro_gpu::{Runtime, RuntimeOptions};
/// let rt = Runtime::with_options(0, &RuntimeOptions::new().stream_slots(4))?;
/// # Ok::<(), tenferro_gpu::Error>(())
/// ```
///
/// The defaults and bounds are the header's constants, linked below; the
/// library checks every value when the runtime is created.
#[derive(Clone, Copy)]
pub struct RuntimeOptions {
    raw: sys::tf_runtime_options,
}

impl RuntimeOptions {
    /// The library's defaults.  Without libtenferro_gpu.so.1 (see
    /// [`crate::load`]) every field but the size is zero; creating a
    /// runtime fails then anyway.
    pub fn new() -> Self {
        RuntimeOptions { raw: defaults(|lib| lib.tf_runtime_options_init) }
    }
    /// Number of stream slots, 1 ..= [`sys::TF_MAX_STREAM_SLOTS`] (default
    /// [`sys::TF_DEFAULT_STREAM_SLOTS`]).
    pub fn stream_slots(mut self, slots: u32) -> Self {
        self.raw.stream_slots = slots;
        self
    }
    /// Bytes of device memory for each slot's cuBLAS workspace; 0 runs
    /// cuBLAS without one (default [`sys::TF_DEFAULT_CUBLAS_WORKSPACE_BYTES`]).
    pub fn cublas_workspace_bytes(mut self, bytes: u64) -> Self {
        self.raw.cublas_workspace_bytes = bytes;
        self
    }
    /// Most workspace retirements in flight, 1 ..=
    /// [`sys::TF_MAX_RETIREMENT_CAPACITY`] (default
    /// [`sys::TF_DEFAULT_RETIREMENT_CAPACITY`]).
    pub fn retirement_capacity(mut self, capacity: u32) -> Self {
        self.raw.retirement_capacity = capacity;
        self
    }
    /// Host threads copying a bulk download into pageable memory, caller
    /// included, 1 ..= [`sys::TF_MAX_DOWNLOAD_THREADS`]; 0 (the default
    /// value of the field) picks [`sys::TF_DEFAULT_DOWNLOAD_THREADS`], or
    /// the number of CPUs the process may run on if that is smaller.
    pub fn download_threads(mut self, threads: u32) -> Self {
        self.raw.download_threads = threads;
        self
    }
    /// Bytes of each page-locked staging buffer a slot uses for bulk
    /// downloads into pageable memory (a slot holds a small fixed number of
    /// them, docs/transfers.md), and the longest step such a download is cut
    /// into: a multiple of 4096 in [`sys::TF_MIN_DOWNLOAD_CHUNK_BYTES`]
    /// ..= [`sys::TF_MAX_DOWNLOAD_CHUNK_BYTES`]; 0 (the default value of the
    /// field) picks [`sys::TF_DEFAULT_DOWNLOAD_CHUNK_BYTES`].
    pub fn download_chunk_bytes(mut self, bytes: u32) -> Self {
        self.raw.download_chunk_bytes = bytes;
        self
    }
    /// Unused device memory, in bytes, that the device's pool keeps when a
    /// synchronizing call (of a stream, an event or the context) finds it
    /// holding more; 0 (the default value of the field) picks
    /// [`sys::TF_DEFAULT_MEMORY_RELEASE_THRESHOLD`], which keeps all until
    /// [`Runtime::trim_memory`] or an out-of-memory retry; 1 keeps none.
    /// The pool is the device's, made by its first runtime: while a
    /// runtime of the device lives, a nonzero value must equal the pool's
    /// (InvalidArgument naming both otherwise; [`Runtime::memory_stats`]
    /// shows it).  A library older than the memory pool refuses a nonzero
    /// value (InvalidArgument: a field it does not know).
    pub fn memory_release_threshold(mut self, bytes: u64) -> Self {
        self.raw.memory_release_threshold = bytes;
        self
    }
    /// Most device memory, in bytes, that the device's pool may hold from
    /// the driver, in use or cached, counted in the driver's granularity;
    /// an allocation that needs more is tried again once the pool gave its
    /// cached memory back, then fails with OutOfMemory.  0 (the default):
    /// no limit; otherwise at least [`sys::TF_MIN_MEMORY_RESERVED_LIMIT`]
    /// (InvalidArgument below it).  A driver too old to bound a pool
    /// refuses the runtime with NotSupported.  Shared by the device's
    /// runtimes, and refused by an older library, as the release threshold
    /// is.
    pub fn memory_reserved_limit(mut self, bytes: u64) -> Self {
        self.raw.memory_reserved_limit = bytes;
        self
    }
    /// The raw struct, for `sys` calls.
    pub fn as_raw(&self) -> &sys::tf_runtime_options {
        &self.raw
    }
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RuntimeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeOptions")
            .field("stream_slots", &self.raw.stream_slots)
            .field("cublas_workspace_bytes", &self.raw.cublas_workspace_bytes)
            .field("retirement_capacity", &self.raw.retirement_capacity)
            .field("download_threads", &self.raw.download_threads)
            .field("download_chunk_bytes", &self.raw.download_chunk_bytes)
            .field("memory_release_threshold", &self.raw.memory_release_threshold)
            .field("memory_reserved_limit", &self.raw.memory_reserved_limit)
            .finish()
    }
}

/// What [`Runtime::supports`] answers for (`enum tf_capability`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// Load PTX, CUBIN and fatbin images and launch their kernels.
    NativeModules,
    /// Compile CUDA C++ at run time (NVRTC can be loaded).
    RuntimeCompilation,
    /// Hand out the slot's raw CUstream.
    RawStream,
    /// Device-to-device copies on one device.
    SameDeviceCopy,
    /// Always false: peer copy depends on the pair of devices.
    PeerCopy,
    /// cuBLAS can be loaded.
    Cublas,
    /// Stream-ordered allocation from the device's memory pool.
    StreamOrderedAlloc,
    /// A capability value this crate does not name (answered false by
    /// libraries that do not know it).
    Other(i32),
}

impl Capability {
    pub fn raw(self) -> i32 {
        match self {
            Capability::NativeModules => sys::TF_CAP_NATIVE_MODULES,
            Capability::RuntimeCompilation => sys::TF_CAP_RUNTIME_COMPILATION,
            Capability::RawStream => sys::TF_CAP_RAW_STREAM,
            Capability::SameDeviceCopy => sys::TF_CAP_SAME_DEVICE_COPY,
            Capability::PeerCopy => sys::TF_CAP_PEER_COPY,
            Capability::Cublas => sys::TF_CAP_CUBLAS,
            Capability::StreamOrderedAlloc => sys::TF_CAP_STREAM_ORDERED_ALLOC,
            Capability::Other(raw) => raw,
        }
    }
}

/// A reference to a tenferro-gpu runtime (`tf_runtime *`).
///
/// `Clone` adds a reference (`tf_runtime_retain`) and `Drop` releases one
/// (`tf_runtime_release`); the runtime is torn down when its last
/// reference goes, streams, buffers, events and modules included.
///
/// A `Runtime`'s own calls use **the calling OS thread's** stream slot (its
/// sequence number modulo the slot count): fine for work that stays on one
/// `std::thread`, wrong for anything that can move between threads between
/// two calls (an async task).  [`Runtime::stream`] gives a [`Stream`], whose
/// calls always use one slot, whichever thread makes them: reach for it
/// first.
pub struct Runtime {
    raw: NonNull<sys::tf_runtime>,
}

// SAFETY: Send + Sync.  The header lets every function be called from any
// thread, and a runtime handle be shared by threads: each function
// serializes what it must (slot locks, the stream-creation lock, atomics).
// The handle is a counted reference, released once by Drop, which needs
// ownership, so no thread can use it after another released it.
unsafe impl Send for Runtime {}
unsafe impl Sync for Runtime {}

impl Runtime {
    /// A runtime on device `ordinal` with the default options.  Errors:
    /// InvalidArgument, DeviceUnavailable (the message lists the devices),
    /// NoDevice, DriverNotFound, DriverStub, DriverTooOld, NotSupported,
    /// OutOfMemory, Cuda; LibraryNotFound without libtenferro_gpu.so.1.
    pub fn new(ordinal: i32) -> Result<Runtime> {
        let lib = api()?;
        // SAFETY: `out` is a valid out pointer.
        let raw = out_param(|out| unsafe { lib.tf_runtime_new(ordinal, out) })?;
        // SAFETY: on TF_OK the library wrote a handle with one reference.
        Ok(unsafe { Runtime::from_raw(raw) })
    }

    /// A runtime on device `ordinal` with `options`; errors as [`Runtime::new`]
    /// (InvalidArgument for an option out of range, or a memory option
    /// other than that of the device's pool, which a runtime still alive
    /// made; NotSupported for a reserved limit the driver cannot keep).
    pub fn with_options(ordinal: i32, options: &RuntimeOptions) -> Result<Runtime> {
        let lib = api()?;
        // SAFETY: valid options struct and out pointer.
        let raw = out_param(|out| unsafe {
            lib.tf_runtime_new_with_options(ordinal, options.as_raw(), out)
        })?;
        Ok(unsafe { Runtime::from_raw(raw) })
    }

    /// Takes ownership of one reference to `raw`.
    ///
    /// # Safety
    /// `raw` must be a live `tf_runtime *` whose reference the caller
    /// gives up (it is released when the `Runtime` drops).
    pub unsafe fn from_raw(raw: *mut sys::tf_runtime) -> Runtime {
        Runtime { raw: NonNull::new(raw).expect("tenferro-gpu: NULL tf_runtime handle") }
    }

    /// The handle, borrowed: valid while `self` lives.
    pub fn as_raw(&self) -> *mut sys::tf_runtime {
        self.raw.as_ptr()
    }

    /// Gives up ownership without releasing; pair with [`Runtime::from_raw`]
    /// or `tf_runtime_release`.
    pub fn into_raw(self) -> *mut sys::tf_runtime {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }

    /// Another reference to the same runtime, or the library's error
    /// (which a live handle never gets).
    pub fn try_clone(&self) -> Result<Runtime> {
        let lib = api()?;
        // SAFETY: a live handle.
        check(unsafe { lib.tf_runtime_retain(self.as_raw()) })?;
        Ok(Runtime { raw: self.raw })
    }

    /// A [`Stream`] on slot `slot`, 0 .. slot count - 1: a handle whose
    /// transfers, enqueues and syncs always use that slot's stream, from
    /// whichever thread they are made (`tf_runtime_bind_slot`).  Streams of
    /// one slot share its stream.  Errors: InvalidArgument (slot out of
    /// range), OutOfMemory.
    pub fn stream(&self, slot: i32) -> Result<Stream> {
        Ok(Stream::bound(self.bind_slot(slot)?, slot))
    }

    /// A [`Stream`] on the slot the calling thread uses now.
    pub fn current_stream(&self) -> Result<Stream> {
        self.stream(self.current_slot()?)
    }

    /// A handle on the same runtime whose calls use stream slot `slot`
    /// whatever thread makes them (`tf_runtime_bind_slot`), as a plain
    /// `Runtime`; [`Runtime::stream`] wraps it as a [`Stream`].  Binding a
    /// bound handle rebinds.  Errors: InvalidArgument (slot out of range),
    /// OutOfMemory.
    pub fn bind_slot(&self, slot: i32) -> Result<Runtime> {
        let lib = api()?;
        // SAFETY: a live handle and a valid out pointer.
        let raw = out_param(|out| unsafe { lib.tf_runtime_bind_slot(self.as_raw(), slot, out) })?;
        Ok(unsafe { Runtime::from_raw(raw) })
    }

    fn query<T: Copy>(
        &self,
        pick: fn(&sys::Library) -> unsafe extern "C" fn(*const sys::tf_runtime, *mut T) -> sys::tf_status,
    ) -> Result<T> {
        let f = pick(api()?);
        // SAFETY: a live handle and a valid out pointer of f's type.
        out_param(|out| unsafe { f(self.as_raw(), out) })
    }

    /// A number fresh for every new runtime in this process, equal for its
    /// clones, streams and bound handles.  A cache key; it grants nothing.
    pub fn identity(&self) -> Result<u64> {
        self.query(|lib| lib.tf_runtime_identity)
    }

    /// Device memory made through this runtime belongs to this domain.
    pub fn allocation_domain(&self) -> Result<u64> {
        self.query(|lib| lib.tf_runtime_allocation_domain)
    }

    /// Properties of the runtime's device (no driver call).
    pub fn device_info(&self) -> Result<DeviceProperties> {
        let lib = api()?;
        // SAFETY: a live handle; `out` is initialised by `query`.
        DeviceProperties::query(lib, |out| unsafe { lib.tf_runtime_device_info(self.as_raw(), out) })
    }

    /// Whether the runtime supports `capability` (an unknown one: false).
    pub fn supports(&self, capability: Capability) -> Result<bool> {
        let lib = api()?;
        // SAFETY: a live handle and a valid out pointer.
        let supported = out_param(|out| unsafe {
            lib.tf_runtime_supports(self.as_raw(), capability.raw(), out)
        })?;
        Ok(supported != 0)
    }

    /// The device's primary context (a `CUcontext`), valid while the
    /// runtime lives.  Prefer [`Runtime::with_context`] to making it
    /// current yourself.
    pub fn primary_context(&self) -> Result<*mut c_void> {
        self.query(|lib| lib.tf_runtime_primary_context)
    }

    /// Number of stream slots.
    pub fn slot_count(&self) -> Result<i32> {
        self.query(|lib| lib.tf_runtime_slot_count)
    }

    /// The stream slot the calling thread uses (the bound slot of a handle
    /// from [`Runtime::bind_slot`]).
    pub fn current_slot(&self) -> Result<i32> {
        self.query(|lib| lib.tf_runtime_current_slot)
    }

    /// The calling thread's slot stream as a raw `CUstream`, created on
    /// first use and never replaced while the runtime lives; for other CUDA
    /// libraries.  Work enqueued on it is ordered with the library's own
    /// work on that slot.  Errors: RuntimeState (forked child), DeviceFault,
    /// Cuda, OutOfMemory.
    pub fn cu_stream(&self) -> Result<*mut c_void> {
        let lib = api()?;
        // SAFETY: a live handle and a valid out pointer.
        out_param(|out| unsafe { lib.tf_runtime_stream(self.as_raw(), out) })
    }

    /// As [`Runtime::cu_stream`] for an explicit slot 0 .. slot count - 1.
    pub fn cu_slot_stream(&self, slot: i32) -> Result<*mut c_void> {
        let lib = api()?;
        // SAFETY: a live handle and a valid out pointer.
        out_param(|out| unsafe { lib.tf_runtime_slot_stream(self.as_raw(), slot, out) })
    }

    /// Runs `f` with the runtime's primary context current on this thread
    /// and returns what it returns.
    ///
    /// The thread's previous current context (none included) is current
    /// again afterwards, however `f` ends.  If `f` panics, the panic is
    /// caught before it reaches the C library (which sees the callback fail
    /// with code -1) and resumed here.  `f` may call this library,
    /// `with_context` included.  Errors: DeviceFault, RuntimeState, Cuda
    /// (the context could not be read or activated; `f` did not run).
    pub fn with_context<F, R>(&self, f: F) -> Result<R>
    where
        F: FnOnce() -> R,
    {
        let lib = api()?;
        let mut frame = Frame::new(f);
        // SAFETY: the trampoline's types match the frame's, and the frame
        // outlives the call, which uses it only while it runs.
        let status = unsafe {
            lib.tf_with_context(
                self.as_raw(),
                Some(with_context_trampoline::<F, R>),
                frame.as_user_data(),
            )
        };
        frame.finish(status, "tf_with_context")
    }

    /// Waits for the work queued on the calling thread's slot stream (the
    /// bound slot of a bound handle), then runs the workspace retirements
    /// the device has passed.  Other slots are not waited for.  Errors:
    /// DeviceFault, RuntimeState, Cuda.
    pub fn sync(&self) -> Result<()> {
        let lib = api()?;
        let since = pending_copies::generation();
        // SAFETY: a live handle.
        check(running_releases(self, || unsafe { lib.tf_runtime_sync(self.as_raw()) }))?;
        pending_copies::synced(self, since);
        Ok(())
    }
}

impl Clone for Runtime {
    /// Adds a reference (`tf_runtime_retain`).  Panics only if the library
    /// refuses a live handle, which would be a bug in it.
    fn clone(&self) -> Runtime {
        self.try_clone().unwrap_or_else(|e| panic!("tenferro-gpu: {e}"))
    }
}

impl Drop for Runtime {
    /// Releases this reference (`tf_runtime_release`).  The last one
    /// synchronizes the runtime's streams and frees what it owns; failures
    /// there go to the log.
    fn drop(&mut self) {
        if let Ok(lib) = api() {
            // SAFETY: this reference is ours; nothing uses it afterwards.
            unsafe { lib.tf_runtime_release(self.raw.as_ptr()) };
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Runtime");
        d.field("handle", &self.raw.as_ptr());
        if let Ok(identity) = self.identity() {
            d.field("identity", &identity);
        }
        d.finish()
    }
}
