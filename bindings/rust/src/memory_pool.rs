// SPDX-License-Identifier: MIT OR Apache-2.0
//! The device's memory pool behind [`Stream::alloc`] (include/tenferro_gpu.h,
//! "Device memory pool"; docs/memory.md): its counters, peak reset, trim,
//! and recorded uses on other slots.  New in 1.2: against an older library
//! every call here returns a NotSupported error saying it is too old.

use crate::error::{check, Error, Result};
use crate::host::since;
use crate::library::api;
use crate::memory::{DeviceBuffer, DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::runtime::Runtime;
use crate::stream::Stream;
use crate::sys;

/// A consistent snapshot of the counters of a device's memory pool
/// (`tf_memory_pool_stats`), shared by every runtime of the device, like
/// `torch.cuda.memory_stats()`.
///
/// Every snapshot has `in_use_bytes <= reserved_bytes <= reserved_peak`,
/// `in_use_bytes <= in_use_peak`, and `allocations - frees` live
/// allocations whose sizes add up to `in_use_bytes`.  Non-exhaustive: the
/// C struct grows at its end, and so may this one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryStats {
    /// Allocations come from the library's pool (false: uncached, the
    /// device has no memory pools and `cuMemAlloc` serves them).
    pub cached: bool,
    /// Device memory the pool holds from the driver (uncached: in use).
    pub reserved_bytes: u64,
    /// Most reserved since the pool's creation or the last peak reset.
    pub reserved_peak: u64,
    /// Live allocations, in the bytes asked for.
    pub in_use_bytes: u64,
    /// Most in use since the pool's creation or the last peak reset.
    pub in_use_peak: u64,
    /// Allocations made (`tf_alloc` calls that allocated).
    pub allocations: u64,
    /// Frees of those allocations.
    pub frees: u64,
    /// Allocations retried after the pool gave its cached memory back.
    pub oom_retries: u64,
    /// Retries that failed anyway (OutOfMemory).
    pub oom_failures: u64,
    /// Give-backs: trims and retries.
    pub trims: u64,
    /// The pool's release threshold ([`crate::RuntimeOptions::memory_release_threshold`]).
    pub release_threshold: u64,
    /// The pool's reserved limit, 0 for none ([`crate::RuntimeOptions::memory_reserved_limit`]).
    pub reserved_limit: u64,
}

impl MemoryStats {
    fn from_raw(raw: &sys::tf_memory_pool_stats) -> MemoryStats {
        MemoryStats {
            cached: raw.cached != 0,
            reserved_bytes: raw.reserved_bytes,
            reserved_peak: raw.reserved_peak,
            in_use_bytes: raw.in_use_bytes,
            in_use_peak: raw.in_use_peak,
            allocations: raw.allocations,
            frees: raw.frees,
            oom_retries: raw.oom_retries,
            oom_failures: raw.oom_failures,
            trims: raw.trims,
            release_threshold: raw.release_threshold,
            reserved_limit: raw.reserved_limit,
        }
    }
}

impl Runtime {
    /// The counters of the memory pool of this runtime's device
    /// (`tf_memory_stats`), the same through every runtime of the device.
    /// Waits only for allocations and frees in progress, never for the
    /// device.  Errors: the device statuses; NotSupported from a library
    /// older than 1.2.
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        let lib = api()?;
        let init = lib
            .tf_memory_pool_stats_init
            .ok_or_else(|| Error::missing("tf_memory_pool_stats_init", "1.2"))?;
        // SAFETY: the struct's own init, a live handle.
        let mut raw = unsafe { sys::initialised(init) };
        check(since(unsafe { lib.tf_memory_stats(self.as_raw(), &mut raw) })?)?;
        Ok(MemoryStats::from_raw(&raw))
    }

    /// Restarts the peaks of [`Runtime::memory_stats`] (`reserved_peak`,
    /// `in_use_peak`) at the current values (`tf_memory_reset_peak`), like
    /// `torch.cuda.reset_peak_memory_stats()`.
    pub fn reset_peak_memory_stats(&self) -> Result<()> {
        let lib = api()?;
        // SAFETY: a live handle.
        check(since(unsafe { lib.tf_memory_reset_peak(self.as_raw()) })?)
    }

    /// Gives the pool's unused memory back to the driver until it holds at
    /// most `keep_bytes` of it (`tf_memory_trim`, `cuMemPoolTrimTo`), like
    /// `torch.cuda.empty_cache()`; memory in use stays.  Blocks until the
    /// device has finished the work queued on every slot of every runtime
    /// of the device, so that their frees count.  Uncached, there is
    /// nothing to give back.
    pub fn trim_memory(&self, keep_bytes: u64) -> Result<()> {
        let lib = api()?;
        // SAFETY: a live handle.
        check(since(unsafe { lib.tf_memory_trim(self.as_raw(), keep_bytes) })?)
    }

    /// Notes that this handle's slot (the calling thread's; a bound
    /// handle's own) uses the allocation holding the raw device address
    /// `ptr` (`tf_memory_record_use`, like PyTorch's
    /// `Tensor.record_stream`): its later free from another slot, of any
    /// runtime of the device, then waits on the device for the work this
    /// slot queued before that free.  For work queued on raw addresses;
    /// [`DeviceBuffer::record_use`] is the typed form.  Errors:
    /// InvalidArgument (`ptr` not inside a live allocation of the device).
    pub fn record_use(&self, ptr: u64) -> Result<()> {
        let lib = api()?;
        // SAFETY: a live handle; the library checks the address.
        check(since(unsafe { lib.tf_memory_record_use(self.as_raw(), ptr) })?)
    }
}

/// Records a use by `stream` of `len` values at `ptr` (nothing to record
/// when empty: no work can touch it).
fn record_on(stream: &Stream, ptr: u64, len: usize) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    stream.runtime().record_use(ptr)
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Notes that work you queued on `stream` yourself (with
    /// [`Stream::stream_enqueue`], [`Stream::cublas_enqueue`], its raw
    /// `CUstream` or raw addresses) uses this buffer, so that its free,
    /// on its own stream, waits on the device for the work `stream` queued
    /// before the free (`tf_memory_record_use`).  Call it after queueing
    /// that work; once per stream is enough.  The crate's own calls record
    /// their uses of buffers of other slots (docs/rust.md, "Lifetime
    /// rules").  NotSupported from a library older than 1.2.
    pub fn record_use(&self, stream: &Stream) -> Result<()> {
        record_on(stream, self.as_raw(), self.len())
    }
}

impl<T: DeviceRepr> DeviceSlice<'_, T> {
    /// [`DeviceBuffer::record_use`] for the allocation this view lies in.
    pub fn record_use(&self, stream: &Stream) -> Result<()> {
        record_on(stream, self.as_raw(), self.len())
    }
}

impl<T: DeviceRepr> DeviceSliceMut<'_, T> {
    /// [`DeviceBuffer::record_use`] for the allocation this view lies in.
    pub fn record_use(&self, stream: &Stream) -> Result<()> {
        record_on(stream, self.as_raw(), self.len())
    }
}
