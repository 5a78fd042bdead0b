// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

func TestStreamIsABoundSlot(t *testing.T) {
	rt := newRuntime(t, 3)
	defer closeRuntime(t, rt)
	s := bind(t, rt, 2)
	want, err := rt.SlotStream(2)
	must(t, err)
	if h, err := s.Handle(); err != nil || h != want {
		t.Fatalf("Handle = %v, %v; want slot 2's stream %v", h, err, want)
	}
	id, _ := rt.Identity()
	if sid, err := s.Identity(); err != nil || sid != id {
		t.Fatalf("the Stream's identity %d, %v; the runtime's %d", sid, err, id)
	}
	// A Stream made from a Stream: another slot of the same runtime.
	other, err := s.NewStream(0)
	must(t, err)
	defer other.Close()
	if slot, err := other.CurrentSlot(); err != nil || slot != 0 || other.Slot() != 0 {
		t.Fatalf("NewStream(0) of a Stream uses slot %d (%v), Slot() %d", slot, err, other.Slot())
	}
	_, err = rt.NewStream(3)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_runtime_bind_slot", "slot 3")
	_, err = rt.NewStream(1 << 40)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_runtime_bind_slot", "does not fit in int32_t")

	// Closing a Stream releases its reference only.
	must(t, other.Close())
	asError(t, other.Sync(), tenferro.StatusInvalidHandle, "tf_runtime_sync", "the Runtime was closed")
	must(t, s.Sync())
	if double != nil && double.PrimaryRefcount(0) != 1 {
		t.Fatalf("primary context refcount %d with the runtime open", double.PrimaryRefcount(0))
	}
}

// Everything that takes a Queue takes a Stream or a Runtime; a nil one is
// an error, not a crash.
func TestQueues(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	s := bind(t, rt, 1)
	b, err := tenferro.BufferFrom(s, []float32{1, 2, 3})
	must(t, err)
	defer b.Free()
	c, err := tenferro.NewBuffer[float32](rt, 3)
	must(t, err)
	defer c.Free()
	must(t, s.PeerCopy(rt, c.Ptr(), b.Ptr(), 12))
	must(t, s.Sync())
	if v, err := tenferro.DownloadScalar[float32](s, c.Ptr().Add(8)); err != nil || v != 3 {
		t.Fatalf("DownloadScalar = %v, %v", v, err)
	}
	var nilStream *tenferro.Stream
	var nilRuntime *tenferro.Runtime
	for _, q := range []tenferro.Queue{nil, nilStream, nilRuntime, &tenferro.Stream{}, &tenferro.Runtime{}} {
		asError(t, tenferro.Upload(q, b.Ptr(), []float32{1}), tenferro.StatusInvalidHandle, "tf_upload", "nil or a zero value")
		_, err := tenferro.NewBuffer[float32](q, 1)
		asError(t, err, tenferro.StatusInvalidHandle, "tf_alloc")
	}
	asError(t, s.PeerCopy(nil, c.Ptr(), b.Ptr(), 4), tenferro.StatusInvalidArgument, "tf_peer_copy", "the other Runtime is nil")
}
