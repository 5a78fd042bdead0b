// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

func TestStreamEnqueue(t *testing.T) {
	rt := newRuntime(t, 3)
	defer closeRuntime(t, rt)
	worker := bind(t, rt, 2)
	want, err := rt.SlotStream(2)
	must(t, err)
	primary, err := rt.PrimaryContext()
	must(t, err)
	var got unsafe.Pointer
	withCallerContext(t, func() {
		must(t, worker.StreamEnqueue(func(stream unsafe.Pointer) error {
			got = stream
			if ctx := testsupport.CurrentContext(); ctx != primary {
				t.Errorf("inside StreamEnqueue %v is current, want the primary %v", ctx, primary)
			}
			// SlotWait takes no slot lock: allowed in here.
			return worker.SlotWait(0)
		}))
	})
	if got != want {
		t.Fatalf("StreamEnqueue got stream %v, want slot 2's %v", got, want)
	}
	err = worker.StreamEnqueue(func(unsafe.Pointer) error { return errMine })
	e := asError(t, err, tenferro.StatusCallback, "tf_stream_enqueue", errMine.Error())
	if !errors.Is(err, errMine) || e.Code != 1 || e.Domain != tenferro.CodeCallback {
		t.Fatalf("callback error %+v", e)
	}
	var inner error
	must(t, worker.StreamEnqueue(func(unsafe.Pointer) error {
		inner = worker.StreamEnqueue(func(unsafe.Pointer) error { return nil })
		return nil
	}))
	asError(t, inner, tenferro.StatusRuntimeState, "tf_stream_enqueue")
	// So is a download through the slot's staging.
	cell, err := tenferro.BufferFrom(worker, []uint32{7})
	must(t, err)
	defer cell.Free()
	must(t, worker.StreamEnqueue(func(unsafe.Pointer) error {
		_, inner = tenferro.DownloadScalar[uint32](worker, cell.Ptr())
		return nil
	}))
	asError(t, inner, tenferro.StatusRuntimeState, "tf_download_scalar")
	func() {
		defer func() {
			if v := recover(); v != "in a stream callback" {
				t.Fatalf("recovered %#v", v)
			}
		}()
		_ = worker.StreamEnqueue(func(unsafe.Pointer) error { panic("in a stream callback") })
	}()
	must(t, worker.StreamEnqueue(func(unsafe.Pointer) error { return nil })) // the slot is free
	asError(t, worker.StreamEnqueue(nil), tenferro.StatusInvalidArgument, "tf_stream_enqueue", "nil")
}

func TestSlotWaitAndEvents(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	producer, consumer := bind(t, rt, 0), bind(t, rt, 1)
	src := randomFloats(3, 100000)
	x, y := bufferPair(t, producer, src)
	must(t, producer.Sync()) // the allocations, for the other slot

	// Slot 1 waits for slot 0's copy, through the slot's event, then reads.
	must(t, producer.Copy(y.Ptr(), x.Ptr(), 4*len(src)))
	must(t, consumer.SlotWait(0))
	got := make([]float32, len(src))
	must(t, tenferro.Download(consumer, got, y.Ptr()))
	if got[len(got)-1] != src[len(src)-1] || got[0] != src[0] {
		t.Fatal("slot 1 did not see slot 0's copy after SlotWait")
	}
	asError(t, consumer.SlotWait(2), tenferro.StatusInvalidArgument, "tf_slot_wait", "other_slot 2 is outside 0..1")

	// The same through an explicit event, and on the host.
	ev, err := rt.NewEvent()
	must(t, err)
	if done, err := ev.Done(); err != nil || !done {
		t.Fatalf("a fresh event: done %v, %v", done, err)
	}
	must(t, tenferro.Upload(producer, x.Ptr(), []float32{42}))
	must(t, producer.Copy(y.Ptr(), x.Ptr(), 4))
	must(t, producer.RecordEvent(ev))
	must(t, consumer.WaitEvent(ev))
	if v, err := tenferro.DownloadScalar[float32](consumer, y.Ptr()); err != nil || v != 42 {
		t.Fatalf("after WaitEvent: %v, %v", v, err)
	}
	must(t, ev.Synchronize())
	if done, err := ev.Done(); err != nil || !done {
		t.Fatalf("after Synchronize: done %v, %v", done, err)
	}
	clone, err := ev.Clone()
	must(t, err)
	must(t, ev.Close())
	must(t, clone.Synchronize()) // the clone's reference keeps it
	asError(t, ev.Close(), tenferro.StatusInvalidHandle, "tf_event_release", "already closed")
	asError(t, ev.Synchronize(), tenferro.StatusInvalidHandle, "tf_event_synchronize", "Event was closed")
	asError(t, producer.RecordEvent(ev), tenferro.StatusInvalidHandle, "tf_event_record", "Event was closed")
	asError(t, producer.WaitEvent(nil), tenferro.StatusInvalidArgument, "tf_event_wait", "nil")
	must(t, clone.Close())
}

// An event keeps its runtime alive after the Runtime's Close.
func TestEventKeepsItsRuntime(t *testing.T) {
	d := requireDouble(t)
	rt := newRuntime(t, 1)
	ev, err := rt.NewEvent()
	must(t, err)
	closeRuntime(t, rt)
	if d.PrimaryRefcount(0) != 1 {
		t.Fatal("the runtime was torn down under a live event")
	}
	must(t, ev.Synchronize())
	must(t, ev.Close())
	if d.PrimaryRefcount(0) != 0 || d.Live(testsupport.Events) != 0 {
		t.Fatalf("after the event's Close: refcount %d, %d events", d.PrimaryRefcount(0), d.Live(testsupport.Events))
	}
}

// A retired release runs once the device passed the work queued before
// it: not before (the double holds events pending), then exactly once.
func TestRetireRunsAfterTheDevice(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	worker := bind(t, rt, 1)
	before, err := rt.RetirementStats()
	must(t, err)
	if double != nil {
		double.SetAsyncPending(true)
		defer double.SetAsyncPending(false)
	}
	buf, err := tenferro.NewBuffer[float32](worker, 1024)
	must(t, err)
	var released atomic.Int32
	must(t, worker.Retire(func() {
		released.Add(1)
		if err := buf.Free(); err != nil {
			t.Errorf("Free from the release: %v", err)
		}
	}))
	must(t, worker.PollRetirements())
	if double != nil && released.Load() != 0 {
		t.Fatal("released before the device passed its event")
	}
	must(t, worker.Sync())
	if released.Load() != 1 {
		t.Fatalf("released %d times after Sync, want 1", released.Load())
	}
	after, err := rt.RetirementStats()
	must(t, err)
	if after.Released != before.Released+1 || after.InFlight != 0 || after.Leaked != 0 ||
		after.Capacity != 1024 || after.Deferred+after.BarrierFallbacks != before.Deferred+before.BarrierFallbacks+1 {
		t.Fatalf("stats %+v before, %+v after", before, after)
	}
	asError(t, worker.Retire(nil), tenferro.StatusInvalidArgument, "tf_workspace_retire", "nil")
	// A panicking release is contained.
	must(t, worker.Retire(func() { panic("in a release") }))
	must(t, worker.Sync())
}

// Pending retirements run when the last reference goes.
func TestRetireRunsAtTeardown(t *testing.T) {
	d := requireDouble(t)
	d.SetAsyncPending(true)
	defer d.SetAsyncPending(false)
	rt := newRuntime(t, 1)
	var released atomic.Int32
	must(t, rt.Retire(func() { released.Add(1) }))
	if released.Load() != 0 {
		t.Fatal("released at once")
	}
	closeRuntime(t, rt)
	if released.Load() != 1 {
		t.Fatalf("released %d times by the teardown, want 1", released.Load())
	}
}
