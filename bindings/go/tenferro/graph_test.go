// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

const graphN = 256

// graphSetup is a runtime of 4 slots, its Stream on slot 0, the add kernel
// and x = 1.0, y = 0.5, out = 0 on the device; all released when the test
// ends.
type graphSetup struct {
	rt        *tenferro.Runtime
	s         *tenferro.Stream
	add       *tenferro.Function
	x, y, out *tenferro.Buffer[float32]
}

func newGraphSetup(t *testing.T) *graphSetup {
	t.Helper()
	rt := newRuntime(t, 4)
	t.Cleanup(func() { closeRuntime(t, rt) })
	s := bind(t, rt, 0)
	m, add := compileAdd(t, s.Runtime)
	t.Cleanup(func() { m.Close() })
	g := &graphSetup{rt: rt, s: s, add: add}
	g.x, g.y, g.out = g.buffer(t, 1), g.buffer(t, 0.5), g.buffer(t, 0)
	must(t, s.Sync())
	return g
}

// buffer is graphN values v on g's Stream, freed when the test ends.
func (g *graphSetup) buffer(t *testing.T, v float32) *tenferro.Buffer[float32] {
	t.Helper()
	b, err := tenferro.BufferFrom(g.s, fill(graphN, v))
	must(t, err)
	t.Cleanup(func() { b.Free() })
	return b
}

// addOn queues out = x + y on q.
func (g *graphSetup) addOn(q *tenferro.Stream, x, y, out *tenferro.Buffer[float32]) error {
	return q.Launch(g.add, tenferro.Blocks1D(graphN, 256), x, y, out, uint32(graphN))
}

// holds checks that b holds graphN values v (downloaded through g's Stream).
func (g *graphSetup) holds(t *testing.T, b *tenferro.Buffer[float32], v float32, what string) {
	t.Helper()
	got := make([]float32, graphN)
	must(t, tenferro.Download(g.s, got, b.Ptr()))
	for i, x := range got {
		if x != v {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, x, v)
		}
	}
}

func refused(t *testing.T, err error, op string) {
	t.Helper()
	asError(t, err, tenferro.StatusRuntimeState, op, "capturing a graph")
}

func TestCapturedWorkRunsAtEachLaunchAndOnlyThen(t *testing.T) {
	g := newGraphSetup(t)
	copied := g.buffer(t, 0)
	graph, err := g.s.Capture(func() error {
		if err := g.addOn(g.s, g.x, g.y, g.out); err != nil {
			return err
		}
		return g.s.Copy(copied.Ptr(), g.out.Ptr(), graphN*4)
	})
	must(t, err)
	defer graph.Close()
	g.holds(t, copied, 0, "captured, not run")
	must(t, graph.Launch(g.s))
	g.holds(t, copied, 1.5, "after a launch")
	// Each launch runs the work on what the memory holds then.
	must(t, g.x.Upload(fill(graphN, -3)))
	must(t, graph.Launch(g.s))
	g.holds(t, copied, -2.5, "after a second launch")
	// On another slot, ordered with it by slot waits.
	other := bind(t, g.rt, 1)
	must(t, g.x.Upload(fill(graphN, 7)))
	must(t, other.SlotWait(0))
	must(t, graph.Launch(other))
	must(t, g.s.SlotWait(1))
	g.holds(t, copied, 7.5, "after a launch on slot 1")
}

func TestCallsThatWaitAreRefusedInsideACaptureWhichGoesOn(t *testing.T) {
	g := newGraphSetup(t)
	copied, scratch := g.buffer(t, 0), g.buffer(t, 0)
	earlier, err := g.s.Capture(func() error { return g.addOn(g.s, g.x, g.y, g.out) })
	must(t, err)
	defer earlier.Close()
	other := bind(t, g.rt, 1)
	elsewhere, err := tenferro.BufferFrom(other, []uint32{5, 5, 5, 5})
	must(t, err)
	defer elsewhere.Free()
	graph, err := g.s.Capture(func() error {
		must(t, g.addOn(g.s, g.x, g.y, g.out))
		refused(t, g.s.Sync(), "tf_runtime_sync")
		refused(t, g.out.Download(make([]float32, graphN)), "tf_download")
		_, err := tenferro.DownloadScalar[float32](g.s, g.out.Ptr())
		refused(t, err, "tf_download_scalar")
		refused(t, scratch.Upload([]float32{1, 2}), "tf_upload")
		refused(t, g.s.PollRetirements(), "tf_workspace_poll")
		refused(t, earlier.Launch(g.s), "tf_graph_launch")
		// The context variants refuse before they record their event,
		// which would go into the graph.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		nodes := func() uint64 { return 0 }
		if double != nil {
			h, err := g.s.Handle()
			must(t, err)
			nodes = func() uint64 { return double.CaptureNodes(h) }
		}
		captured := nodes()
		refused(t, g.s.SyncContext(ctx), "tf_runtime_sync")
		refused(t, g.out.DownloadContext(ctx, make([]float32, 4)), "tf_download")
		_, err = tenferro.DownloadScalarContext[float32](ctx, g.s, g.out.Ptr())
		refused(t, err, "tf_download_scalar")
		deviceMovesOn()
		must(t, other.SyncContext(ctx)) // another slot waits as usual
		if n := nodes(); n != captured {
			t.Errorf("the context variants added %d nodes to the capture", n-captured)
		}
		// A temporary allocated and freed inside is the graph's own.
		tmp, err := g.s.Alloc(64)
		must(t, err)
		must(t, g.s.Free(tmp))
		_, err = g.s.Capture(func() error { panic("a second capture of the slot never begins") })
		asError(t, err, tenferro.StatusRuntimeState, "tf_graph_capture_begin")
		// Other slots work as usual.
		got, err := elsewhere.ToSlice()
		must(t, err)
		if got[3] != 5 {
			t.Errorf("slot 1 read %v during slot 0's capture", got)
		}
		return g.s.Copy(copied.Ptr(), g.out.Ptr(), graphN*4) // captured after the refusals
	})
	must(t, err)
	defer graph.Close()
	must(t, graph.Launch(g.s))
	g.holds(t, copied, 1.5, "the work captured before and after the refusals")
}

func TestAFailingOrPanickingFunctionAbortsTheCapture(t *testing.T) {
	g := newGraphSetup(t)
	graphs := int64(-1)
	if double != nil {
		graphs = double.Live(testsupport.Graphs)
	}
	panicked := func() (r interface{}) {
		defer func() { r = recover() }()
		g.s.Capture(func() error {
			must(t, g.addOn(g.s, g.x, g.y, g.out))
			panic("inside the capture")
		})
		return nil
	}()
	if panicked != "inside the capture" {
		t.Fatalf("the panic came back as %v", panicked)
	}
	must(t, g.s.Sync()) // no capture is open
	g.holds(t, g.out, 0, "the aborted work never ran")
	// fn's own error comes back as it is, the capture aborted.
	mine := errors.New("the function failed")
	_, err := g.s.Capture(func() error {
		must(t, g.addOn(g.s, g.x, g.y, g.out))
		return mine
	})
	if err != mine {
		t.Fatalf("Capture returned %v, want the function's own error", err)
	}
	if double != nil {
		h, err := g.s.Handle()
		must(t, err)
		if n := double.CaptureNodes(h); n != 0 || double.Live(testsupport.Graphs) != graphs {
			t.Fatalf("an aborted capture left %d nodes, %d graphs (had %d)", n, double.Live(testsupport.Graphs), graphs)
		}
	}
	_, err = g.s.Capture(nil)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_graph_capture_begin", "nil")
	// The slot captures again.
	graph, err := g.s.Capture(func() error { return g.addOn(g.s, g.x, g.y, g.out) })
	must(t, err)
	defer graph.Close()
	must(t, graph.Launch(g.s))
	g.holds(t, g.out, 1.5, "a capture after the aborted ones")
}

func TestAnUpdateIsInPlaceForTheSameShapeAndAnewForAnother(t *testing.T) {
	g := newGraphSetup(t)
	x2, out2, copied := g.buffer(t, 10), g.buffer(t, 0), g.buffer(t, 0)
	graph, err := g.s.Capture(func() error { return g.addOn(g.s, g.x, g.y, g.out) })
	must(t, err)
	defer graph.Close()
	twin, err := graph.Clone()
	must(t, err)
	defer twin.Close()
	inPlace, err := graph.Update(g.s, func() error { return g.addOn(g.s, x2, g.y, out2) })
	if err != nil || !inPlace {
		t.Fatalf("an update of the same shape: in place %v, %v", inPlace, err)
	}
	must(t, twin.Launch(g.s)) // every clone runs the new work
	g.holds(t, out2, 10.5, "the updated work")
	g.holds(t, g.out, 0, "the earlier work is gone")
	inPlace, err = graph.Update(g.s, func() error {
		must(t, g.addOn(g.s, g.x, g.y, g.out))
		return g.s.Copy(copied.Ptr(), g.out.Ptr(), graphN*4)
	})
	if err != nil || inPlace {
		t.Fatalf("an update of another shape: in place %v, %v", inPlace, err)
	}
	must(t, graph.Launch(g.s))
	g.holds(t, copied, 1.5, "the reinstantiated work")
	// Another runtime's graph: refused, the slot no longer captures, and
	// neither graph changed.
	otherRT, err := tenferro.NewRuntime(0)
	must(t, err)
	defer otherRT.Close()
	on := bind(t, otherRT, 0)
	a, err := tenferro.BufferFrom(on, []byte{3, 3, 3, 3})
	must(t, err)
	defer a.Free()
	b, err := tenferro.BufferFrom(on, []byte{0, 0, 0, 0})
	must(t, err)
	defer b.Free()
	foreign, err := on.Capture(func() error { return on.Copy(b.Ptr(), a.Ptr(), 4) })
	must(t, err)
	defer foreign.Close()
	_, err = foreign.Update(g.s, func() error { return g.addOn(g.s, g.x, g.y, g.out) })
	asError(t, err, tenferro.StatusInvalidArgument, "tf_graph_capture_update")
	must(t, g.s.Sync())
	asError(t, foreign.Launch(g.s), tenferro.StatusInvalidArgument, "tf_graph_launch")
	must(t, foreign.Launch(on))
	if got, err := b.ToSlice(); err != nil || got[0] != 3 {
		t.Fatalf("the other runtime's graph copied %v, %v", got, err)
	}
	// An update through a closed Graph aborts the capture.
	closed, err := graph.Clone()
	must(t, err)
	must(t, closed.Close())
	_, err = closed.Update(g.s, func() error { return g.addOn(g.s, g.x, g.y, g.out) })
	asError(t, err, tenferro.StatusInvalidHandle, "tf_graph_capture_update")
	must(t, g.s.Sync())
}

// Graphs launch from any goroutine and are released by the last Close,
// or by the finalizer of one never closed.
func TestGraphReferencesAndTheirFinalizer(t *testing.T) {
	g := newGraphSetup(t)
	execs := int64(-1)
	if double != nil {
		execs = double.Live(testsupport.GraphExecs)
	}
	graph, err := g.s.Capture(func() error { return g.addOn(g.s, g.x, g.y, g.out) })
	must(t, err)
	done := make(chan error)
	for slot := 1; slot < 4; slot++ {
		clone, err := graph.Clone()
		must(t, err)
		s := bind(t, g.rt, slot)
		go func() {
			err := clone.Launch(s)
			if err == nil {
				err = s.Sync()
			}
			if err == nil {
				err = clone.Close() // the others still hold it
			}
			done <- err
		}()
	}
	for slot := 1; slot < 4; slot++ {
		must(t, <-done)
	}
	g.holds(t, g.out, 1.5, "launched on slots 1 to 3")
	must(t, graph.Close())
	asError(t, graph.Close(), tenferro.StatusInvalidHandle, "tf_graph_release")
	asError(t, graph.Launch(g.s), tenferro.StatusInvalidHandle, "tf_graph_launch")
	var none *tenferro.Graph
	asError(t, none.Launch(g.s), tenferro.StatusInvalidHandle, "tf_graph_launch")
	asError(t, none.Close(), tenferro.StatusInvalidHandle, "tf_graph_release")
	if double == nil {
		return
	}
	if n := double.Live(testsupport.GraphExecs); n != execs {
		t.Fatalf("%d executable graphs after the last Close, want %d", n, execs)
	}
	func() { // dropped without Close
		_, err := g.s.Capture(func() error { return g.addOn(g.s, g.x, g.y, g.out) })
		must(t, err)
	}()
	for deadline := time.Now().Add(5 * time.Second); double.Live(testsupport.GraphExecs) != execs; {
		if time.Now().After(deadline) {
			t.Fatal("the finalizer did not release a Graph dropped without Close")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// What the double can break: each failed call leaves no capture open and
// no graph behind, and the slot works afterwards.
func TestFailedCaptureCallsLeaveNothingBehind(t *testing.T) {
	d := requireDouble(t)
	g := newGraphSetup(t)
	graphs, execs := d.Live(testsupport.Graphs), d.Live(testsupport.GraphExecs)
	works := func(what string) {
		t.Helper()
		must(t, g.s.Sync())
		h, err := g.s.Handle()
		must(t, err)
		if d.CaptureNodes(h) != 0 || d.Live(testsupport.Graphs) != graphs || d.Live(testsupport.GraphExecs) != execs {
			t.Fatalf("after %s: %d nodes, %d graphs, %d executables", what, d.CaptureNodes(h),
				d.Live(testsupport.Graphs), d.Live(testsupport.GraphExecs))
		}
	}
	add := func() error { return g.addOn(g.s, g.x, g.y, g.out) }
	d.Fail("cuStreamBeginCapture", 1, testsupport.CudaErrorUnknown, 1)
	_, err := g.s.Capture(func() error { panic("the function of a capture that never began") })
	e := asError(t, err, tenferro.StatusCUDA, "tf_graph_capture_begin")
	if e.Call != "cuStreamBeginCapture" {
		t.Fatalf("a failed begin names %q", e.Call)
	}
	works("a failed begin")
	d.Fail("cuGraphInstantiateWithFlags", 1, testsupport.CudaErrorUnknown, 1)
	_, err = g.s.Capture(add)
	if e := asError(t, err, tenferro.StatusCUDA, "tf_graph_capture_end"); e.Call != "cuGraphInstantiateWithFlags" {
		t.Fatalf("a failed instantiation names %q", e.Call)
	}
	works("a failed instantiation")
	// The end refused without ending: Capture aborts what is still open.
	d.Fail("cuStreamEndCapture", 1, testsupport.CudaErrorUnknown, 1)
	_, err = g.s.Capture(add)
	asError(t, err, tenferro.StatusCUDA, "tf_graph_capture_end", "still open")
	works("an end that left the capture open")
	// An update the driver refuses in place: instantiated anew, the same Graph.
	graph, err := g.s.Capture(add)
	must(t, err)
	d.Fail("cuGraphExecUpdate", 1, testsupport.CudaErrorUnknown, 1)
	inPlace, err := graph.Update(g.s, func() error { return g.addOn(g.s, g.y, g.y, g.out) })
	if err != nil || inPlace {
		t.Fatalf("an update refused in place: in place %v, %v", inPlace, err)
	}
	must(t, graph.Launch(g.s))
	g.holds(t, g.out, 1, "the reinstantiated update")
	must(t, graph.Close())
	works("an update that was instantiated anew")
}

// A capture whose end and both aborts fail stays open: Capture says so,
// the slot's waits are refused, and the runtime's teardown drops it (the
// end-of-test check sees the primary context released).
func TestACaptureThatCannotBeAbortedSaysSo(t *testing.T) {
	d := requireDouble(t)
	rt := newRuntime(t, 2)
	s, err := rt.NewStream(0)
	must(t, err)
	x, err := tenferro.BufferFrom(s, []byte{1, 2, 3, 4})
	must(t, err)
	y, err := tenferro.NewBuffer[byte](s, 4)
	must(t, err)
	d.Fail("cuStreamEndCapture", 1, testsupport.CudaErrorUnknown, 3) // the end, two aborts
	_, err = s.Capture(func() error { return s.Copy(y.Ptr(), x.Ptr(), 4) })
	asError(t, err, tenferro.StatusCUDA, "tf_graph_capture_end", "still open")
	if !strings.Contains(err.Error(), "could not be aborted, the slot still captures") {
		t.Fatalf("the error does not say the capture is still open: %v", err)
	}
	refused(t, s.Sync(), "tf_runtime_sync")
	refused(t, x.Free(), "tf_free")
	other := bind(t, rt, 1)
	must(t, other.Sync()) // other slots are unaffected
	must(t, s.Close())
	must(t, rt.Close()) // the teardown drops the capture; x and y go with the context
}
