// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

func TestCloneAndBindShareIdentity(t *testing.T) {
	rt := newRuntime(t, 4)
	other := newRuntime(t, 4)
	defer closeRuntime(t, other)
	clone, err := rt.Clone()
	if err != nil {
		t.Fatal(err)
	}
	defer closeRuntime(t, clone)
	bound, err := rt.BindSlot(3)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRuntime(t, bound)

	id, _ := rt.Identity()
	domain, _ := rt.AllocationDomain()
	otherID, _ := other.Identity()
	if id == otherID || id == domain {
		t.Fatalf("identity %d, other runtime's %d, domain %d", id, otherID, domain)
	}
	for _, h := range []*tenferro.Runtime{clone, bound} {
		hid, err1 := h.Identity()
		hdomain, err2 := h.AllocationDomain()
		if err1 != nil || err2 != nil || hid != id || hdomain != domain {
			t.Fatalf("handle identity %d/%d, want %d/%d (%v %v)", hid, hdomain, id, domain, err1, err2)
		}
	}
	if slot, err := bound.CurrentSlot(); err != nil || slot != 3 {
		t.Fatalf("bound CurrentSlot = %d, %v", slot, err)
	}
	// The clone outlives the original's Close.
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := clone.Sync(); err != nil {
		t.Fatalf("clone after the original closed: %v", err)
	}
}

func TestRuntimeQueries(t *testing.T) {
	rt := newRuntime(t, 3)
	defer closeRuntime(t, rt)
	if n, err := rt.SlotCount(); err != nil || n != 3 {
		t.Fatalf("SlotCount = %d, %v", n, err)
	}
	dev, err := rt.Device()
	want, _ := tenferro.DeviceInfo(0)
	if err != nil || dev != want {
		t.Fatalf("Device = %+v, %v; DeviceInfo(0) = %+v", dev, err, want)
	}
	if ctx, err := rt.PrimaryContext(); err != nil || ctx == nil {
		t.Fatalf("PrimaryContext = %v, %v", ctx, err)
	}
	if ok, err := rt.Supports(tenferro.CapRawStream); err != nil || !ok {
		t.Fatalf("Supports(CapRawStream) = %v, %v", ok, err)
	}
	if ok, err := rt.Supports(tenferro.CapPeerCopy); err != nil || ok {
		t.Fatalf("Supports(CapPeerCopy) = %v, %v (always false)", ok, err)
	}
	if ok, err := rt.Supports(tenferro.Capability(9999)); err != nil || ok {
		t.Fatalf("an unknown capability: %v, %v", ok, err)
	}
	s0, err := rt.SlotStream(0)
	s0again, _ := rt.SlotStream(0)
	s2, _ := rt.SlotStream(2)
	if err != nil || s0 == nil || s0 != s0again || s2 == s0 {
		t.Fatalf("slot streams %v %v %v, %v", s0, s0again, s2, err)
	}
	_, err = rt.SlotStream(3)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_runtime_slot_stream", "slot 3")
	_, err = rt.BindSlot(-1)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_runtime_bind_slot", "slot -1")
	if err := rt.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestOptions(t *testing.T) {
	requireDevice(t)
	d := tenferro.DefaultOptions()
	if d.StreamSlots != 8 || d.CublasWorkspaceBytes != 32<<20 || d.RetirementCapacity != 1024 ||
		d.DownloadThreads != 0 || d.DownloadChunkBytes != 0 {
		t.Fatalf("DefaultOptions = %+v", d)
	}
	// Each constructor reports under its own name.
	cases := []struct {
		change func(*tenferro.Options)
		want   string
	}{
		{func(o *tenferro.Options) { o.StreamSlots = tenferro.MaxStreamSlots + 1 }, "stream_slots 257 is outside"},
		{func(o *tenferro.Options) { o.RetirementCapacity = 0 }, "retirement_capacity 0 is outside"},
		{func(o *tenferro.Options) { o.DownloadThreads = tenferro.MaxDownloadThreads + 1 }, "download_threads 65 is outside"},
		{func(o *tenferro.Options) { o.DownloadChunkBytes = tenferro.MinDownloadChunkBytes + 1 }, "download_chunk_bytes 65537"},
		{func(o *tenferro.Options) { o.RetirementCapacity = -1 }, "retirement_capacity -1 does not fit in uint32_t"},
		{func(o *tenferro.Options) { o.DownloadThreads = -1 }, "download_threads -1 does not fit in uint32_t"},
	}
	for _, c := range cases {
		bad := d
		c.change(&bad)
		_, err := tenferro.NewRuntimeWithOptions(0, bad)
		asError(t, err, tenferro.StatusInvalidArgument, "tf_runtime_new_with_options", c.want)
	}
	// Every field reaches the library: a runtime made with all of them set
	// works, and downloads through its staging with the chosen chunk.
	good := d
	good.StreamSlots, good.RetirementCapacity = 3, 7
	good.DownloadThreads, good.DownloadChunkBytes = 2, tenferro.MinDownloadChunkBytes
	rt, err := tenferro.NewRuntimeWithOptions(0, good)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRuntime(t, rt)
	if n, _ := rt.SlotCount(); n != 3 {
		t.Fatalf("SlotCount %d, want 3", n)
	}
	if s, _ := rt.RetirementStats(); s.Capacity != 7 {
		t.Fatalf("retirement capacity %d, want 7", s.Capacity)
	}
	checkRoundTrip(t, bind(t, rt, 0), 3*tenferro.MinDownloadChunkBytes/4+5)
}

func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	rt := newRuntime(t, 2)
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	asError(t, rt.Close(), tenferro.StatusInvalidHandle, "tf_runtime_release", "already closed")
	asError(t, rt.Sync(), tenferro.StatusInvalidHandle, "tf_runtime_sync", "closed")
	_, err := rt.Clone()
	asError(t, err, tenferro.StatusInvalidHandle, "tf_runtime_retain", "closed")
	if double != nil {
		if n := double.Calls("cuDevicePrimaryCtxRelease"); n != 1 {
			t.Fatalf("the primary context was released %d times, want 1", n)
		}
	}
}

// collect runs the garbage collector until cond holds or a second passes.
func collect(cond func() bool) bool {
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return true
}

// A Runtime dropped without Close is released by its finalizer; one that
// was closed is not released again.
func TestFinalizerReleasesExactlyOnce(t *testing.T) {
	d := requireDouble(t)
	func() {
		rt := newRuntime(t, 2)
		if _, err := rt.Stream(); err != nil {
			t.Fatal(err)
		}
		closed := newRuntime(t, 2)
		closeRuntime(t, closed)
	}()
	if !collect(func() bool { return d.PrimaryRefcount(0) == 0 }) {
		t.Fatalf("the finalizer did not release the runtime: refcount %d", d.PrimaryRefcount(0))
	}
	runtime.GC()
	runtime.GC()
	if n := d.Calls("cuDevicePrimaryCtxRelease"); n != 2 {
		t.Fatalf("cuDevicePrimaryCtxRelease called %d times for 2 runtimes", n)
	}
	if d.Live(0) != 0 {
		t.Fatalf("%d streams left alive", d.Live(0))
	}
}

// Close while another goroutine is inside a call: the release waits for
// that call, which completes normally.
func TestCloseWhileInUse(t *testing.T) {
	d := requireDouble(t)
	rt := newRuntime(t, 2)
	inside := make(chan struct{})
	proceed := make(chan struct{})
	var wg sync.WaitGroup
	var callErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		callErr = rt.WithContext(func() error {
			close(inside)
			<-proceed
			return nil
		})
	}()
	<-inside
	if err := rt.Close(); err != nil {
		t.Fatalf("Close while in use: %v", err)
	}
	if d.PrimaryRefcount(0) != 1 {
		t.Fatal("released while a call was still running")
	}
	asError(t, rt.Sync(), tenferro.StatusInvalidHandle, "tf_runtime_sync", "closed")
	close(proceed)
	wg.Wait()
	if callErr != nil {
		t.Fatalf("the call in flight: %v", callErr)
	}
	if d.PrimaryRefcount(0) != 0 {
		t.Fatal("the last call did not release the closed runtime")
	}
}
