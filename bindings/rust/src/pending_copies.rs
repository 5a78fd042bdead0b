// SPDX-License-Identifier: MIT OR Apache-2.0
//! Host memory that a failed synchronous copy may still use.
//!
//! `tf_download` and `tf_upload` queue their copy on the slot and then wait
//! for it.  When they fail after queueing it (any status but
//! InvalidArgument), the header says the device may still write (or read)
//! page-locked host memory: keep it until a later `tf_runtime_sync` of the
//! slot returns TF_OK, or leak it.  A `&mut [T]` does not say whether it
//! is page-locked, so [`after_failed_copy`] notes every such failure here:
//! the range, the runtime, the slot.  The owners of page-locked memory
//! ([`HostBuffer`](crate::HostBuffer), [`Registered`](crate::Registered),
//! the scope of [`Runtime::with_host_registered`]) ask [`settle`] before
//! they let go: a noted range is let go only after a sync of its slot
//! succeeds, and is leaked otherwise.  A sync through this crate that
//! succeeds forgets what was noted on its slot before it began, so notes on
//! pageable memory do not pile up.
//!
//! While nothing is noted, checking costs one atomic load; noting makes
//! only calls that succeed, so the failed call's error record stays the
//! thread's last error.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::sys;

/// A range a failed copy on `slot` of the runtime `runtime` (its identity)
/// may still use; `generation` orders it against syncs.
struct Noted {
    bytes: Range<usize>,
    runtime: u64,
    slot: i32,
    generation: u64,
}

static NOTED: Mutex<Vec<Noted>> = Mutex::new(Vec::new());
/// `NOTED.len()`, read without the lock.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Bumped by every note: a sync forgets only notes older than its start.
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn noted() -> MutexGuard<'static, Vec<Noted>> {
    NOTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// After `status`, the failure of a `tf_download` / `tf_upload` through
/// `handle` on `len` bytes at `ptr`: notes the range if the copy may still
/// run (any status but InvalidArgument).
pub(crate) fn after_failed_copy(
    handle: &Runtime,
    ptr: *const u8,
    len: usize,
    status: sys::tf_status,
) {
    if status == sys::TF_OK || status == sys::TF_ERROR_INVALID_ARGUMENT || len == 0 {
        return; // done, or nothing was queued
    }
    // Queries without a driver call: they succeed on a live handle.
    let (Ok(runtime), Ok(slot)) = (handle.identity(), handle.current_slot()) else { return };
    let start = ptr as usize;
    let entry = Noted {
        bytes: start..start.saturating_add(len),
        runtime,
        slot,
        generation: GENERATION.fetch_add(1, Ordering::SeqCst),
    };
    let mut list = noted();
    list.push(entry);
    COUNT.store(list.len(), Ordering::SeqCst);
}

/// Taken before a sync: [`synced`] forgets only notes older than this.
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::SeqCst)
}

/// A sync of `handle`'s slot that began at `since` (from [`generation`])
/// succeeded: the copies noted on that slot before it are done.
pub(crate) fn synced(handle: &Runtime, since: u64) {
    if COUNT.load(Ordering::SeqCst) == 0 {
        return;
    }
    let (Ok(runtime), Ok(slot)) = (handle.identity(), handle.current_slot()) else { return };
    let mut list = noted();
    list.retain(|n| !(n.runtime == runtime && n.slot == slot && n.generation < since));
    COUNT.store(list.len(), Ordering::SeqCst);
}

/// Whether the owner of `len` bytes at `ptr`, page-locked through
/// `owner`, may let go of them (in `operation`, which an error names): `Ok` once every failed copy noted on them
/// is shown done by a sync of its slot (made here, through `owner`, which
/// forgets those notes).  `Err` when a sync fails, or a copy ran on another
/// runtime, which `owner` cannot sync: the memory must then be leaked, and
/// the notes stay until a sync of their slot succeeds.
pub(crate) fn settle(owner: &Runtime, ptr: *const u8, len: usize, operation: &str) -> Result<()> {
    if COUNT.load(Ordering::SeqCst) == 0 {
        return Ok(());
    }
    let start = ptr as usize;
    let range = start..start.saturating_add(len);
    let mut slots: Vec<(u64, i32)> = noted()
        .iter()
        .filter(|n| n.bytes.start < range.end && range.start < n.bytes.end)
        .map(|n| (n.runtime, n.slot))
        .collect();
    slots.sort_unstable();
    slots.dedup();
    for (runtime, slot) in slots {
        if owner.identity()? != runtime {
            return Err(Error::runtime_state(
                operation,
                "a failed copy through another runtime may still use this page-locked memory \
                 (until a sync of its slot succeeds); it is leaked",
            ));
        }
        owner.bind_slot(slot)?.sync()?;
    }
    Ok(())
}
