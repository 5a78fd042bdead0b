// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// Graph is one reference to an executable CUDA graph of a runtime
// (tf_graph): the work a Capture queued on a slot, which Launch queues
// again, with the parameters captured, on whatever the memory holds when it
// runs.  It keeps its runtime alive.  It uses device memory by address at
// every launch: keep the buffers it uses, and the Modules whose kernels it
// launches, alive while it may run.
//
// Its methods may be called from any goroutine; launches and updates of
// one graph take turns.  Close releases the reference (launches still
// queued finish first); a finalizer releases a Graph that was never closed.
// New in 1.2: against an older library the calls return StatusNotSupported
// (ErrLibraryTooOld).
type Graph struct {
	h *handle
}

func newGraph(ptr unsafe.Pointer) *Graph {
	g := &Graph{h: newHandle(ptr, "Graph", "tf_graph_release", graphRelease)}
	runtime.SetFinalizer(g, func(g *Graph) { g.h.close() })
	return g
}

func (g *Graph) handle() *handle {
	if g == nil {
		return nil
	}
	return g.h
}

// Capture captures the work fn queues on the Stream's slot into a new
// Graph (tf_graph_capture_begin, then tf_graph_capture_end): while fn
// runs, every call that only queues work on the slot (Launch,
// CublasEnqueue, StreamEnqueue, Copy, PeerCopy, the asynchronous copies,
// RecordEvent, WaitEvent, SlotWait, WithContext), through this Stream or
// any other reference to the slot, from any goroutine, is captured, not
// run.  Calls that would wait for the device (Sync, Download, Upload,
// DownloadScalar, Retire, PollRetirements, a Graph's Launch, another
// Capture of the slot) and Alloc and Free return StatusRuntimeState and
// leave the capture intact.  Other slots work as usual.
//
// When fn returns an error, or panics (or calls runtime.Goexit), the
// capture is aborted (tf_graph_capture_abort) and fn's error returned, or
// the panic goes on; the slot then works as before.  If even the abort
// fails, the error says so and the slot still captures: its calls that
// wait are refused until the runtime's teardown drops the capture.
func (s *Stream) Capture(fn func() error) (*Graph, error) {
	var g *Graph
	err := s.capture(fn, "tf_graph_capture_end", func(p unsafe.Pointer) error {
		ptr, err := graphCaptureEnd(p)
		if err == nil {
			g = newGraph(ptr)
		}
		return err
	})
	return g, err
}

// Update captures the work fn queues on s's slot, as Capture does, into g
// (tf_graph_capture_update): from its next launch on, g (and every Clone
// of it) runs the new work instead of its earlier capture; launches
// already queued run the earlier work.  inPlace is true when the new work
// had g's shape (the same calls in the same order, with other addresses or
// values) and g's executable was updated in place, far cheaper than a new
// instantiation; false when it was instantiated anew.  On an error g still
// runs its earlier work.  s must be a Stream of g's runtime
// (StatusInvalidArgument otherwise).
func (g *Graph) Update(s *Stream, fn func() error) (inPlace bool, err error) {
	const op = "tf_graph_capture_update"
	err = s.capture(fn, op, func(p unsafe.Pointer) error {
		return g.handle().use(op, func(gp unsafe.Pointer) (err error) {
			inPlace, err = graphCaptureUpdate(p, gp)
			return err
		})
	})
	return inPlace, err
}

// capture begins a capture on s's slot, runs fn, then ends it with end
// (called with s's pointer), or aborts it when fn or end failed or fn did
// not return.
func (s *Stream) capture(fn func() error, endOp string, end func(p unsafe.Pointer) error) error {
	if fn == nil {
		return bindingError(StatusInvalidArgument, "tf_graph_capture_begin", "the function to capture is nil")
	}
	if err := s.streamRuntime().do("tf_graph_capture_begin", graphCaptureBegin); err != nil {
		return err
	}
	unmark := s.markCapture()
	abort := func() error {
		err := s.abortCapture()
		if err == nil {
			unmark()
		}
		return err
	}
	returned := false
	defer func() { // fn panicked or called runtime.Goexit: the panic goes on after the abort
		if !returned {
			abort()
		}
	}()
	err := fn()
	if err == nil {
		err = s.streamRuntime().do(endOp, end)
	}
	returned = true
	if err != nil {
		return withAbort(err, abort())
	}
	unmark()
	return nil
}

// streamRuntime is s's bound reference, nil for a nil Stream (whose calls
// then fail with StatusInvalidHandle).
func (s *Stream) streamRuntime() *Runtime {
	if s == nil {
		return nil
	}
	return s.Runtime
}

// abortCapture ends the slot's capture, dropping what it captured; nil
// once no capture is open (StatusRuntimeState: none was, a failed end may
// have ended it).  The header says to call again after a failure.
func (s *Stream) abortCapture() (err error) {
	for try := 0; try < 2; try++ {
		err = s.streamRuntime().do("tf_graph_capture_abort", graphCaptureAbort)
		if err == nil || errors.Is(err, StatusRuntimeState) {
			return nil
		}
	}
	return err
}

// withAbort is err, saying so when the abort after it failed.
func withAbort(err, abortErr error) error {
	if abortErr == nil {
		return err
	}
	return fmt.Errorf("%w (and the capture could not be aborted, the slot still captures: %v)", err, abortErr)
}

// Launch queues the graph on q's slot (a Stream; a Runtime's current
// slot), after the work queued there and after the graph's previous launch
// on any slot, and returns (tf_graph_launch).  q must be a reference to the
// graph's runtime: another runtime's, even of the same device, is
// StatusInvalidArgument, as is a launch whose page-locked memory was freed
// or unregistered since the capture; StatusRuntimeState while the slot
// captures, or a slot the graph waits for does.
func (g *Graph) Launch(q Queue) error {
	return useBoth("tf_graph_launch", runtimeOf(q).handle(), g.handle(), graphLaunch)
}

// Clone returns a new reference to the same graph (tf_graph_retain): it
// launches the same work, and an Update through either is what both run.
func (g *Graph) Clone() (*Graph, error) {
	var ptr unsafe.Pointer
	err := g.handle().use("tf_graph_retain", func(p unsafe.Pointer) error {
		ptr = p
		return graphRetain(p)
	})
	if err != nil {
		return nil, err
	}
	return newGraph(ptr), nil
}

// Close releases this reference (tf_graph_release); the last one destroys
// the graph once its queued launches are done, and may tear the runtime
// down as Runtime.Close does.  A second Close returns StatusInvalidHandle.
func (g *Graph) Close() error {
	if g == nil {
		return errNotOpen("tf_graph_release")
	}
	runtime.SetFinalizer(g, nil)
	return g.h.close()
}
