// SPDX-License-Identifier: MIT OR Apache-2.0
//! Buffers used on a slot other than their own: the crate records the use.
//!
//! A [`DeviceBuffer`](crate::DeviceBuffer) is freed in order on its own
//! stream.  Work queued on another slot that uses it would not be ordered
//! before that free, and the pool could hand the memory to a later
//! allocation while the work still reads or writes it.  So every call of
//! this crate that queues work on buffers or views (copies, uploads, GEMMs,
//! kernel launches, asynchronous copies) records, once the work is queued,
//! each operand whose buffer belongs to another slot, of this runtime or
//! another of the device (`tf_memory_record_use`): its free then waits for
//! that slot's work on the device.  Downloads need none (they return once
//! the device is done), nor do operands of the calling handle itself (a
//! pointer compare) or of its slot (two queries that make no driver call).
//!
//! Not recorded: views made with `from_raw` (their memory need not come
//! from `tf_alloc`), work queued by hand (closures, raw streams, raw
//! addresses: [`DeviceBuffer::record_use`](crate::DeviceBuffer::record_use)
//! is for that), a peer copy's destination on another device (the C call
//! records a slot of the memory's own device), and everything on a library
//! older than 1.2, which has no recorded uses.

use crate::error::{check, Result};
use crate::library::api;
use crate::runtime::Runtime;
use crate::stream::Stream;

/// Device memory of a buffer that a call uses: an address inside it and
/// the stream it is freed on.  [`KernelArg::device_use`] returns one for
/// buffers and their views, so that a launch records their uses; it has no
/// public constructor.
///
/// [`KernelArg::device_use`]: crate::KernelArg::device_use
#[derive(Clone, Copy, Debug)]
pub struct DeviceUse<'a> {
    pub(crate) ptr: u64,
    pub(crate) owner: &'a Stream,
}

impl Runtime {
    /// After this handle queued work on `uses`: records every one freed on
    /// another slot (above).  An error leaves that use unrecorded.
    pub(crate) fn record_uses<'a>(
        &self,
        uses: impl IntoIterator<Item = Option<DeviceUse<'a>>>,
    ) -> Result<()> {
        let mut here: Option<(u64, i32)> = None; // identity and slot, when needed
        for used in uses.into_iter().flatten() {
            if used.owner.as_raw() == self.as_raw() {
                continue; // the buffer's own handle, or a clone of it
            }
            let here = match here {
                Some(known) => known,
                None => *here.insert((self.identity()?, self.current_slot()?)),
            };
            if here == (used.owner.runtime().identity()?, used.owner.slot()) {
                continue;
            }
            let Some(record) = api()?.tf_memory_record_use else {
                return Ok(()); // a 1.1 library: nothing records uses
            };
            // SAFETY: a live handle; the address lies in a live buffer.
            check(unsafe { record(self.as_raw(), used.ptr) })?;
        }
        Ok(())
    }
}
