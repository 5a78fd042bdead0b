// SPDX-License-Identifier: MIT OR Apache-2.0
//! Graph capture (include/tenferro_gpu.h, "Graph capture"; docs/graphs.md):
//! the work a closure queues on a slot becomes a [`Graph`] that runs again
//! with one launch.  New in 1.2: against an older library the calls return
//! a NotSupported error saying it is too old.
//!
//! A capture is a closure's scope, not a guard: [`Stream::capture`] begins
//! it, runs the closure, and ends it (or, when the closure returns an error
//! or panics, aborts it) before it returns.  A guard whose `Drop` ended the
//! capture would leave the slot capturing when forgotten
//! (`std::mem::forget` is safe); a closure cannot be forgotten halfway.
//! Only an abort that fails twice (the device statuses: a sticky fault,
//! say) leaves a capture open, and what an open capture can do is bounded
//! by the library: calls that wait are refused, queued work is captured
//! and never runs, frees are refused (a buffer dropped there is leaked),
//! this crate refuses its asynchronous copies on the slot (capture_gate.rs),
//! and the runtime's teardown drops the capture.

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::{self, NonNull};

use crate::capture_gate::Opening;
use crate::error::{check, Error, Result};
use crate::host::since;
use crate::library::api;
use crate::runtime::Runtime;
use crate::stream::Stream;
use crate::sys;

/// An executable CUDA graph of one runtime (`tf_graph *`): the work
/// captured on a slot, which [`Graph::launch`] queues again on any slot of
/// that runtime, with the parameters captured, on whatever the memory holds
/// when it runs.
///
/// `Clone` adds a reference (`tf_graph_retain`) to the same graph: clones
/// launch the same work, and an update through one
/// ([`Stream::capture_into`]) is what every clone runs from its next
/// launch.  `Drop` releases a reference; launches still queued finish
/// first.  The graph keeps its runtime alive.  It uses device memory by
/// address at every launch: keep the buffers it uses alive while it may
/// run (docs/rust.md, "Lifetime rules").
pub struct Graph {
    raw: NonNull<sys::tf_graph>,
}

// SAFETY: Send + Sync.  The header lets any thread launch, retain and
// release a graph; launches and updates of one graph take turns on its
// lock.  This reference is released only in Drop, which needs ownership.
unsafe impl Send for Graph {}
unsafe impl Sync for Graph {}

/// How [`Stream::capture_into`] made the graph run its new capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Updated {
    /// The new work had the graph's shape (the same calls in the same
    /// order, other addresses or values): its executable was updated in
    /// place (`cuGraphExecUpdate`), far cheaper than an instantiation.
    InPlace,
    /// It had another shape: instantiated anew.
    Reinstantiated,
}

impl Graph {
    /// Queues the graph on `on`'s slot (a [`Stream`], or a [`Runtime`]'s
    /// calling thread's slot), after the work queued there and after the
    /// graph's previous launch on any slot, and returns
    /// (`tf_graph_launch`).  `on` must be a handle of the graph's runtime.
    /// Errors: InvalidArgument (another runtime's graph; page-locked memory
    /// its copies use was freed since the capture), RuntimeState (the slot
    /// captures a graph, or a slot the graph waits for does), the device
    /// statuses.
    pub fn launch(&self, on: &impl AsRef<Runtime>) -> Result<()> {
        let lib = api()?;
        // SAFETY: live handles.
        check(since(unsafe { lib.tf_graph_launch(on.as_ref().as_raw(), self.as_raw()) })?)
    }

    /// Another reference to the same graph, or the library's error (which a
    /// live graph never gets).
    pub fn try_clone(&self) -> Result<Graph> {
        let lib = api()?;
        // SAFETY: a live graph.
        check(since(unsafe { lib.tf_graph_retain(self.as_raw()) })?)?;
        Ok(Graph { raw: self.raw })
    }

    /// The handle, borrowed: valid while `self` lives.
    pub fn as_raw(&self) -> *mut sys::tf_graph {
        self.raw.as_ptr()
    }

    /// Gives up ownership without releasing; pair with [`Graph::from_raw`]
    /// or `tf_graph_release`.
    pub fn into_raw(self) -> *mut sys::tf_graph {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }

    /// Takes ownership of one reference to `raw`.
    ///
    /// # Safety
    /// `raw` must be a live `tf_graph *` whose reference the caller gives
    /// up (it is released when the `Graph` drops).
    pub unsafe fn from_raw(raw: *mut sys::tf_graph) -> Graph {
        Graph { raw: NonNull::new(raw).expect("tenferro-gpu: NULL tf_graph handle") }
    }
}

impl Clone for Graph {
    /// Adds a reference (`tf_graph_retain`).  Panics only if the library
    /// refuses a live graph, which would be a bug in it.
    fn clone(&self) -> Graph {
        self.try_clone().unwrap_or_else(|e| panic!("tenferro-gpu: {e}"))
    }
}

impl Drop for Graph {
    /// Releases this reference (`tf_graph_release`); the last one destroys
    /// the graph once its queued launches are done, and may tear the
    /// runtime down.
    fn drop(&mut self) {
        if let Ok(lib) = api() {
            // SAFETY: this reference is ours; nothing uses it afterwards.
            let _ = unsafe { lib.tf_graph_release(self.raw.as_ptr()) };
        }
    }
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph").field("handle", &self.raw.as_ptr()).finish()
    }
}

impl AsRef<Runtime> for Stream {
    /// The bound handle (as [`Stream::runtime`]).
    fn as_ref(&self) -> &Runtime {
        self.runtime()
    }
}

impl AsRef<Runtime> for Runtime {
    fn as_ref(&self) -> &Runtime {
        self
    }
}

impl Stream {
    /// Captures the work `f` queues on this stream's slot into a new
    /// [`Graph`] (`tf_graph_capture_begin`, `tf_graph_capture_end`): while
    /// `f` runs, every call that only queues work on the slot (kernel
    /// launches, GEMMs, device copies, events, slot waits, enqueued
    /// closures), through `f`'s stream or any other handle of the slot on
    /// any thread, is captured instead of run.  `f` gets this stream.
    ///
    /// Calls that would wait for the device (`sync`, downloads, `upload`,
    /// retirements, a graph's launch, a capture of the same slot) return
    /// RuntimeState and leave the capture intact; so do this crate's
    /// asynchronous copies on the slot.  Allocations and frees follow the
    /// library (docs/graphs.md; refused for now: a buffer dropped inside
    /// the capture is then leaked).  Other slots work as usual.
    ///
    /// If `f` returns an error or panics, the capture is aborted
    /// (`tf_graph_capture_abort`) and the error returned or the panic
    /// resumed; the slot works as before.  Errors also: RuntimeState (the
    /// slot captures already), the device statuses, NotSupported from a
    /// library older than 1.2.
    ///
    /// ```no_run
    /// # use tenferro_gpu::{Runtime, LaunchConfig, Function};
    /// # fn f(rt: &Runtime, add: &Function) -> tenferro_gpu::Result<()> {
    /// let stream = rt.stream(0)?;
    /// let (x, y) = (stream.alloc_from(&[1.0f32; 256])?, stream.alloc_from(&[2.0f32; 256])?);
    /// let (out, mut copy) = (stream.alloc::<f32>(256)?, stream.alloc::<f32>(256)?);
    /// let graph = stream.capture(|s| {
    ///     // SAFETY: the arguments match the kernel's parameters.
    ///     unsafe { s.launch(add, &LaunchConfig::linear(256, 256), &[&x, &y, &out, &256u32])? };
    ///     s.copy(&out, &mut copy)
    /// })?;
    /// graph.launch(&stream)?; // the kernel and the copy, one launch
    /// assert_eq!(stream.to_vec(&copy)?, vec![3.0; 256]);
    /// # Ok(()) }
    /// ```
    pub fn capture<F>(&self, f: F) -> Result<Graph>
    where
        F: FnOnce(&Stream) -> Result<()>,
    {
        self.run_capture(f, || {
            let lib = api()?;
            let mut raw = ptr::null_mut();
            // SAFETY: a live handle and a valid out pointer.
            check(since(unsafe { lib.tf_graph_capture_end(self.as_raw(), &mut raw) })?)?;
            // SAFETY: on TF_OK the library wrote a graph with one reference.
            Ok(unsafe { Graph::from_raw(raw) })
        })
    }

    /// As [`Stream::capture`], into the existing `graph` of this runtime
    /// (`tf_graph_capture_update`): from its next launch on, `graph` (and
    /// every clone of it) runs the new work instead of its earlier capture;
    /// launches already queued run the earlier work.  Updated in place when
    /// the new work has the same shape, far cheaper than a new capture's
    /// instantiation; instantiated anew otherwise.  On an error `graph`
    /// still runs its earlier work.  Errors also: InvalidArgument (another
    /// runtime's graph).
    pub fn capture_into<F>(&self, graph: &Graph, f: F) -> Result<Updated>
    where
        F: FnOnce(&Stream) -> Result<()>,
    {
        self.run_capture(f, || {
            let lib = api()?;
            let mut in_place = 0i32;
            // SAFETY: live handles and a valid out pointer.
            check(since(unsafe {
                lib.tf_graph_capture_update(self.as_raw(), graph.as_raw(), &mut in_place)
            })?)?;
            Ok(if in_place != 0 { Updated::InPlace } else { Updated::Reinstantiated })
        })
    }

    /// Begins a capture on this slot, runs `f`, then `end`s it (or aborts
    /// it when `f` or `end` failed, or `f` panicked, whose panic is then
    /// resumed).
    fn run_capture<F, T>(&self, f: F, end: impl FnOnce() -> Result<T>) -> Result<T>
    where
        F: FnOnce(&Stream) -> Result<()>,
    {
        let lib = api()?;
        if lib.tf_graph_capture_begin.is_none() {
            // Before the slot is listed: nothing to undo.
            return Err(Error::missing("tf_graph_capture_begin", "1.2"));
        }
        let opening = Opening::new(self)?;
        // SAFETY: a live handle.
        if let Err(e) = check(since(unsafe { lib.tf_graph_capture_begin(self.as_raw()) })?) {
            opening.close();
            return Err(e);
        }
        let ran = panic::catch_unwind(AssertUnwindSafe(|| f(self)));
        let ended = match ran {
            Ok(Ok(())) => Some(end()),
            _ => None,
        };
        if matches!(ended, Some(Ok(_))) || self.abort_capture() {
            opening.close();
        } // else the capture is still open: the slot stays listed
        match ran {
            Err(payload) => panic::resume_unwind(payload),
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => ended.expect("ended after the closure succeeded"),
        }
    }

    /// Ends this slot's capture, dropping what it captured; true once no
    /// capture is open (also when none was: a failed end may have ended
    /// it).  The header says to call again after a failure; a second
    /// failure leaves it open.
    fn abort_capture(&self) -> bool {
        let Ok(lib) = api() else { return false };
        (0..2).any(|_| {
            // SAFETY: a live handle.
            match unsafe { lib.tf_graph_capture_abort(self.as_raw()) } {
                Ok(sys::TF_OK) | Ok(sys::TF_ERROR_RUNTIME_STATE) => true,
                _ => false,
            }
        })
    }
}

impl Runtime {
    /// [`Stream::capture`] on the calling thread's slot (the bound slot of
    /// a bound handle); `f` gets that slot's [`Stream`].
    pub fn capture<F>(&self, f: F) -> Result<Graph>
    where
        F: FnOnce(&Stream) -> Result<()>,
    {
        self.current_stream()?.capture(f)
    }

    /// [`Stream::capture_into`] on the calling thread's slot.
    pub fn capture_into<F>(&self, graph: &Graph, f: F) -> Result<Updated>
    where
        F: FnOnce(&Stream) -> Result<()>,
    {
        self.current_stream()?.capture_into(graph, f)
    }
}
