// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// Uses of a Buffer on a slot other than its own: Launch records its Buffer
// arguments, work queued on raw addresses needs RecordUse.

const recordN = 1024

// freeWhileSlot1Writes: slot 1 writes 3.0 (1.5+1.5) over x, a buffer of
// slot 0, with write (against the double deferred: it runs at slot 1's
// Sync); x is freed on slot 0 and the pool hands its memory to y on slot
// 0, filled with 7.0.  It returns the value y holds once both slots ran:
// 7 when the free waited for slot 1's work, 3 when that work landed in y.
func freeWhileSlot1Writes(t *testing.T, write func(s1 *tenferro.Stream, f *tenferro.Function, src, x *tenferro.Buffer[float32])) float32 {
	t.Helper()
	rt := newRuntime(t, 2)
	t.Cleanup(func() { closeRuntime(t, rt) })
	s0, s1 := bind(t, rt, 0), bind(t, rt, 1)
	m, f := compileAdd(t, s1.Runtime)
	t.Cleanup(func() { m.Close() })
	src, err := tenferro.BufferFrom(s1, fill(recordN, 1.5))
	must(t, err)
	t.Cleanup(func() { src.Free() })
	x, err := tenferro.NewBuffer[float32](s0, recordN)
	must(t, err)
	address := x.Ptr()
	write(s1, f, src, x)
	must(t, x.Free())
	y, err := tenferro.BufferFrom(s0, fill(recordN, 7))
	must(t, err)
	defer y.Free()
	if y.Ptr() != address {
		t.Fatalf("y is at %v, x was at %v: the pool did not hand x's memory out again", y.Ptr(), address)
	}
	must(t, s0.Sync())
	must(t, s1.Sync())
	back, err := y.ToSlice()
	must(t, err)
	for _, v := range back {
		if v != back[0] {
			t.Fatalf("y holds both %v and %v", back[0], v)
		}
	}
	return back[0]
}

func fill(n int, v float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func TestABufferUsedOnAnotherSlotIsFreedAfterThatWork(t *testing.T) {
	requireDouble(t)
	cfg := tenferro.Blocks1D(recordN, 256)
	t.Run("Launch records its Buffer arguments", func(t *testing.T) {
		got := freeWhileSlot1Writes(t, func(s1 *tenferro.Stream, f *tenferro.Function, src, x *tenferro.Buffer[float32]) {
			must(t, s1.Launch(f, cfg, src, src, x, uint32(recordN)))
		})
		if got != 7 {
			t.Fatalf("y holds %v: the kernel on slot 1 wrote x's memory after it was handed out again", got)
		}
	})
	// The double shows the hazard the record prevents, so the case above
	// can fail ...
	raw := func(s1 *tenferro.Stream, f *tenferro.Function, src, x *tenferro.Buffer[float32]) {
		must(t, s1.Launch(f, cfg, src.Ptr(), src.Ptr(), x.Ptr(), uint32(recordN)))
	}
	t.Run("raw addresses are not recorded", func(t *testing.T) {
		if got := freeWhileSlot1Writes(t, raw); got != 3 {
			t.Fatalf("y holds %v, want slot 1's late 3: the double no longer shows the hazard", got)
		}
	})
	// ... unless the use is recorded by hand.
	t.Run("RecordUse by hand", func(t *testing.T) {
		got := freeWhileSlot1Writes(t, func(s1 *tenferro.Stream, f *tenferro.Function, src, x *tenferro.Buffer[float32]) {
			raw(s1, f, src, x)
			must(t, x.RecordUse(s1))
		})
		if got != 7 {
			t.Fatalf("y holds %v after RecordUse", got)
		}
	})
}

// A launch records its Buffer arguments of other handles: a free of one
// then records an event on the launching slot's stream.  A Buffer of the
// launching handle, or of another handle of the same slot, costs the free
// no event.
func TestLaunchRecordsOnlyBuffersOfOtherSlots(t *testing.T) {
	d := requireDouble(t)
	rt := newRuntime(t, 2)
	t.Cleanup(func() { closeRuntime(t, rt) })
	s0, s1, sameSlot := bind(t, rt, 0), bind(t, rt, 1), bind(t, rt, 0)
	m, f := compileAdd(t, rt)
	t.Cleanup(func() { m.Close() })
	theirs, err := tenferro.BufferFrom(s1, fill(64, 2))
	must(t, err)
	t.Cleanup(func() { theirs.Free() })
	other, err := tenferro.NewRuntime(0)
	must(t, err)
	t.Cleanup(func() { other.Close() })
	onOther := bind(t, other, 0)
	// eventsAtFree launches on `by` with a fresh buffer of slot 0 as the
	// output, then frees it on slot 0: the event records the free made.
	eventsAtFree := func(by *tenferro.Stream) uint64 {
		mine, err := tenferro.NewBuffer[float32](s0, 64)
		must(t, err)
		must(t, s0.Sync())
		must(t, by.Launch(f, tenferro.Blocks1D(64, 64), theirs, theirs, mine, uint32(64)))
		records := d.Calls("cuEventRecord")
		must(t, mine.Free())
		return d.Calls("cuEventRecord") - records
	}
	for _, c := range []struct {
		what string
		by   *tenferro.Stream
		want uint64
	}{
		{"another slot", s1, 1},
		{"the buffer's own Stream", s0, 0},
		{"another Stream of the buffer's slot", sameSlot, 0},
		{"another runtime of the device", onOther, 1},
	} {
		if got := eventsAtFree(c.by); got != c.want {
			t.Errorf("a launch on %s: the free recorded %d events, want %d", c.what, got, c.want)
		}
	}
	must(t, s0.Sync())
	must(t, s1.Sync())
	must(t, onOther.Sync())
	var none *tenferro.Buffer[float32]
	asError(t, s0.Launch(f, tenferro.Blocks1D(1, 1), none), tenferro.StatusInvalidArgument, "tf_kernel_launch", "argument 0")
}
