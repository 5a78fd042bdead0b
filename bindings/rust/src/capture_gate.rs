// SPDX-License-Identifier: MIT OR Apache-2.0
//! The slots capturing a graph through this crate, and the asynchronous
//! copies they refuse.
//!
//! A [`Transfer`](crate::Transfer) hands its host memory back once its
//! event says the copy is done.  Captured, the copy would not run then but
//! at every launch of the graph, and an event recorded into a capture that
//! has ended says "done" at once: the memory would come back to safe code
//! while later launches still write or read it.  So `download_async` and
//! `upload_async` refuse on a slot that captures (RuntimeState), and a
//! capture never begins in the middle of one.
//!
//! INVARIANT (capture gate): a crate copy is never captured.  A copy
//! counts itself in flight (its slot's bucket of [`IN_FLIGHT`]), then looks
//! for its slot among the [`OPEN`] captures, and stays counted until its
//! event is recorded; a capture adds its slot to [`OPEN`], then waits until
//! its bucket has no copy in flight, and only then begins.  Both sides use
//! sequentially consistent operations, so either the copy sees the capture
//! (and refuses) or the capture sees the copy (and waits for it).  No lock
//! is held across a C call: a copy made inside an enqueue callback, which
//! holds its slot's lock, never waits for a capture that waits for it.
//! Buckets are shared by slots whose keys collide; a capture then also
//! waits for their copies, each of which is short.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::stream::Stream;

/// A slot: its runtime's identity and its number.
type Key = (u64, i32);

/// Captures begun (or beginning) through this crate and not over.
static OPEN: Mutex<Vec<Key>> = Mutex::new(Vec::new());
/// `OPEN.len()`, read without the lock.
static OPEN_COUNT: AtomicUsize = AtomicUsize::new(0);
const BUCKETS: usize = 256;
#[allow(clippy::declare_interior_mutable_const)] // copied into IN_FLIGHT only
const IDLE: AtomicUsize = AtomicUsize::new(0);
/// Copies between their look at [`OPEN`] and their event's record.
static IN_FLIGHT: [AtomicUsize; BUCKETS] = [IDLE; BUCKETS];

fn open() -> MutexGuard<'static, Vec<Key>> {
    OPEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn bucket(key: Key) -> &'static AtomicUsize {
    let mixed = key.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (key.1 as u64);
    &IN_FLIGHT[(mixed >> 32) as usize % BUCKETS]
}

fn key_of(stream: &Stream) -> Result<Key> {
    Ok((stream.runtime().identity()?, stream.slot()))
}

/// Leaves the bucket on every exit, a panic included.
struct InFlight(&'static AtomicUsize);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// Runs `queue` (an asynchronous copy on `stream` and its event's record)
/// unless the slot captures; `operation` names the refusal.
pub(crate) fn async_copy<R>(
    stream: &Stream,
    operation: &str,
    queue: impl FnOnce() -> Result<R>,
) -> Result<R> {
    let key = key_of(stream)?;
    let counter = bucket(key);
    counter.fetch_add(1, SeqCst);
    let _in_flight = InFlight(counter);
    if OPEN_COUNT.load(SeqCst) != 0 && open().contains(&key) {
        return Err(Error::runtime_state(
            operation,
            &format!(
                "slot {} is capturing a graph: a captured copy would run at every launch, after \
                 its Transfer gave the host memory back; queue it before or after the capture",
                key.1
            ),
        ));
    }
    queue()
}

/// A slot's place in [`OPEN`], from before its capture begins until the
/// capture is over ([`Opening::close`]); a capture still open stays listed.
pub(crate) struct Opening {
    key: Key,
}

impl Opening {
    /// Lists `stream`'s slot, then waits out the copies in flight on it.
    pub(crate) fn new(stream: &Stream) -> Result<Opening> {
        let key = key_of(stream)?;
        {
            let mut list = open();
            list.push(key);
            OPEN_COUNT.store(list.len(), SeqCst);
        }
        let counter = bucket(key);
        while counter.load(SeqCst) != 0 {
            std::thread::yield_now();
        }
        Ok(Opening { key })
    }

    /// The capture is over (ended, aborted, or never begun).
    pub(crate) fn close(self) {
        let mut list = open();
        if let Some(at) = list.iter().position(|&k| k == self.key) {
            list.swap_remove(at);
        }
        OPEN_COUNT.store(list.len(), SeqCst);
    }
}
