// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// moveOffThread makes the calling goroutine, locked to OS thread `from`,
// continue locked to another OS thread that accept (if not nil) agrees
// to, and returns that thread's id.  It unlocks and parks the goroutine
// while helper goroutines lock themselves to the threads that are free
// (from among them), so that it wakes on another one; it checks where it
// woke and tries again if need be.
func moveOffThread(t *testing.T, from int, accept func() bool) int {
	t.Helper()
	for attempt := 0; attempt < 200; attempt++ {
		runtime.UnlockOSThread()
		hogs := runtime.GOMAXPROCS(0) + 2
		var ready sync.WaitGroup
		release := make(chan struct{})
		ready.Add(hogs)
		for i := 0; i < hogs; i++ {
			go func() {
				runtime.LockOSThread()
				ready.Done()
				<-release
				runtime.UnlockOSThread()
			}()
		}
		ready.Wait() // parked: its thread may now run a hog
		runtime.LockOSThread()
		close(release)
		if tid := syscall.Gettid(); tid != from && (accept == nil || accept()) {
			return tid
		}
	}
	t.Fatalf("the goroutine never left OS thread %d (or found no acceptable one)", from)
	return 0
}

func sequence(n int, base uint32) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = base + uint32(i)*7
	}
	return s
}

func sameValues(a, b []uint32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// A goroutine uploads through its Stream on one OS thread, is moved to
// another, and downloads through the same Stream: the download is ordered
// after the upload (one slot, one CUDA stream) and sees the data.  Against
// the double the upload is still queued, unrun, when the goroutine moves
// (deferred execution), so only that ordering can make the data appear.
// TestUnboundRuntimeLosesTheUploadAcrossThreads is the same sequence
// without a Stream.
func TestStreamKeepsItsWorkOrderedAcrossOSThreads(t *testing.T) {
	rt := newRuntime(t, 4)
	defer closeRuntime(t, rt)
	s := bind(t, rt, 2)
	const n = 4096
	buf, err := tenferro.NewBuffer[uint32](s, n)
	must(t, err)
	defer buf.Free()
	must(t, s.Sync())

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	first := syscall.Gettid()
	want := sequence(n, 11)
	must(t, buf.Upload(want))
	handle, err := s.Handle()
	must(t, err)
	if double != nil && double.Pending(handle) == 0 {
		t.Fatal("the upload already ran: the double is not deferring stream work")
	}
	second := moveOffThread(t, first, nil)
	got := make([]uint32, n)
	must(t, buf.Download(got))
	if !sameValues(got, want) {
		t.Fatalf("uploaded on OS thread %d, downloaded on %d through one Stream: got %v..., want %v...",
			first, second, got[:4], want[:4])
	}
	if slot, err := s.CurrentSlot(); err != nil || slot != 2 {
		t.Fatalf("the Stream's slot on the new thread: %d, %v", slot, err)
	}
	t.Logf("upload on OS thread %d, download on OS thread %d, both on slot %d", first, second, s.Slot())
}

// The same sequence through the unbound Runtime, which picks the slot of
// the calling OS thread: the upload is queued on the first thread's slot,
// the download runs on the second thread's slot, which does not wait for
// it, and reads the memory as it was before the upload.  This is the
// documented behaviour of an unbound Runtime used from a goroutine (why
// Stream exists).  It is deterministic against the double: the goroutine is
// moved until its thread's slot differs, and deferred execution keeps the
// upload unrun until its own stream is synchronized.  On a GPU the upload
// may or may not have finished in time, so it runs against the double
// only.
func TestUnboundRuntimeLosesTheUploadAcrossThreads(t *testing.T) {
	d := requireDouble(t)
	rt := newRuntime(t, 4)
	defer closeRuntime(t, rt)
	const n = 4096
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	first := syscall.Gettid()
	slotA, err := rt.CurrentSlot()
	must(t, err)
	buf, err := tenferro.NewBuffer[uint32](rt, n)
	must(t, err)
	before := sequence(n, 1)
	must(t, buf.Upload(before))
	must(t, rt.Sync()) // slot A ran: the device holds `before`
	after := sequence(n, 500)
	must(t, buf.Upload(after)) // queued on slot A, not run
	// Once the test is over, run slot A and free the memory there.
	onA := bind(t, rt, slotA)
	defer func() {
		must(t, onA.Sync())
		must(t, onA.Free(buf.Ptr()))
		must(t, onA.Sync())
	}()

	var slotB int
	second := moveOffThread(t, first, func() bool {
		slotB, err = rt.CurrentSlot()
		return err == nil && slotB != slotA
	})
	got := make([]uint32, n)
	must(t, tenferro.Download(rt, got, buf.Ptr()))
	if !sameValues(got, before) {
		t.Fatalf("the download on slot %d (OS thread %d) saw %v..., want the data from before the upload "+
			"still queued on slot %d (OS thread %d), %v...", slotB, second, got[:4], slotA, first, before[:4])
	}
	sa, _ := rt.SlotStream(slotA)
	if d.Pending(sa) == 0 {
		t.Fatal("the upload on slot A ran although nothing synchronized it")
	}
	t.Logf("upload queued on slot %d (OS thread %d); the download on slot %d (OS thread %d) read the old data",
		slotA, first, slotB, second)
}
