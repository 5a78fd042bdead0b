// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"context"
	"errors"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// mmapped is anonymous memory that Go does not manage, unmapped at the end
// of the test: what HostRegister is documented to take.
func mmapped(t *testing.T, n int) []byte {
	t.Helper()
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	must(t, err)
	t.Cleanup(func() { syscall.Munmap(mem) })
	return mem
}

func hostStats(t *testing.T, rt *tenferro.Runtime) tenferro.HostPoolStats {
	t.Helper()
	s, err := rt.HostStats()
	must(t, err)
	return s
}

// A HostBuffer is Len bytes of C memory seen through an ordinary slice,
// typed by HostSlice; Free is idempotent and leaves no view.
func TestHostBufferIsASliceOfPageLockedMemory(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	h, err := rt.HostAlloc(4096)
	must(t, err)
	if h.Len() != 4096 || len(h.Bytes()) != 4096 || h.Ptr() == nil {
		t.Fatalf("HostAlloc(4096): Len %d, len(Bytes) %d, Ptr %v", h.Len(), len(h.Bytes()), h.Ptr())
	}
	floats := tenferro.HostSlice[float32](h)
	if len(floats) != 1024 {
		t.Fatalf("HostSlice[float32] has %d values, want 1024", len(floats))
	}
	floats[1] = 1
	if b := h.Bytes(); b[4] != 0 || b[7] != 0x3f || b[6] != 0x80 {
		t.Fatalf("the float32 1 written through HostSlice reads % x through Bytes", b[4:8])
	}
	must(t, h.Free())
	must(t, h.Free())
	if h.Bytes() != nil || h.Ptr() != nil || tenferro.HostSlice[float32](h) != nil {
		t.Fatal("a freed HostBuffer still has a view")
	}
	asError(t, h.RecordUse(rt), tenferro.StatusInvalidHandle, "tf_host_record_use", "freed")
}

func TestHostAllocRefusesBadSizes(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	_, err := rt.HostAlloc(0)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_host_alloc")
	_, err = rt.HostAlloc(-1)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_host_alloc", "negative")
}

// The pool's counters follow an allocation, its free (kept for reuse), a
// reuse without a driver call, and a trim.
func TestHostStatsFollowAllocFreeAndTrim(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	before := hostStats(t, rt)
	h, err := rt.HostAlloc(5000) // size class 8 KiB
	must(t, err)
	s := hostStats(t, rt)
	if s.BlocksInUse != before.BlocksInUse+1 || s.BytesInUse != before.BytesInUse+8192 ||
		s.DriverAllocations != before.DriverAllocations+1 {
		t.Fatalf("after HostAlloc(5000): %+v (before %+v)", s, before)
	}
	must(t, h.Free())
	s = hostStats(t, rt)
	if s.BlocksInUse != before.BlocksInUse || s.BlocksCached < 1 {
		t.Fatalf("after Free: %+v", s)
	}
	again, err := rt.HostAlloc(8000)
	must(t, err)
	if n := hostStats(t, rt).DriverAllocations; n != s.DriverAllocations {
		t.Fatalf("a block of a cached class took a driver allocation (%d, want %d)", n, s.DriverAllocations)
	}
	must(t, again.Free())
	must(t, rt.HostTrim())
	if s = hostStats(t, rt); s.BlocksCached != 0 || s.BytesCached != 0 {
		t.Fatalf("after HostTrim: %+v", s)
	}
}

// A block holds a reference to its runtime: Free works after the Runtime
// it came from was closed, and releases the runtime.
func TestHostBufferKeepsItsRuntime(t *testing.T) {
	d := requireDouble(t)
	rt, err := tenferro.NewRuntime(0)
	must(t, err)
	h, err := rt.HostAlloc(64)
	must(t, err)
	closeRuntime(t, rt)
	if n := d.PrimaryRefcount(0); n != 1 {
		t.Fatalf("primary context retained %d times while the block lives, want 1", n)
	}
	h.Bytes()[0] = 7
	must(t, h.Free())
	if n := d.PrimaryRefcount(0); n != 0 {
		t.Fatalf("primary context retained %d times after Free, want 0", n)
	}
}

// Upload from one block and download into another, asynchronously, through
// a Stream and through a Buffer; a sub-slice of a block is accepted.
func TestAsyncRoundTripThroughHostBuffers(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	s := bind(t, rt, 1)
	want := sequence(256, 11)
	buf, err := tenferro.NewBuffer[uint32](s, len(want))
	must(t, err)
	defer buf.Free()
	src, err := s.HostAlloc(4 * len(want))
	must(t, err)
	defer src.Free()
	dst, err := s.HostAlloc(4 * len(want))
	must(t, err)
	defer dst.Free()
	copy(tenferro.HostSlice[uint32](src), want)

	up, err := buf.UploadAsync(tenferro.HostSlice[uint32](src))
	must(t, err)
	must(t, up.Wait())
	must(t, up.Close())
	down, err := tenferro.DownloadAsync(s, tenferro.HostSlice[uint32](dst), buf.Ptr())
	must(t, err)
	must(t, down.Wait())
	if done, err := down.Done(); err != nil || !done {
		t.Fatalf("after Wait: Done %v, %v", done, err)
	}
	must(t, down.Close())
	if got := tenferro.HostSlice[uint32](dst); !sameValues(got, want) {
		t.Fatalf("round trip: got %v..., want %v...", got[:4], want[:4])
	}
	part := tenferro.HostSlice[uint32](dst)[8:16]
	for i := range part {
		part[i] = 0
	}
	e, err := tenferro.DownloadAsync(s, part, buf.Ptr().Add(4*100))
	must(t, err)
	must(t, e.Wait())
	e.Close()
	if !sameValues(part, want[100:108]) {
		t.Fatalf("download into a sub-slice: %v, want %v", part, want[100:108])
	}
	_, err = buf.DownloadAsync(make([]uint32, len(want)+1))
	asError(t, err, tenferro.StatusInvalidArgument, "tf_download_async", "more than the buffer's")
}

// The copy is only queued: until the stream runs it the destination is
// untouched and the Event pending; WaitContext stops waiting when its
// context is done and leaves the copy queued; Wait then completes it.
func TestDownloadAsyncReturnsBeforeTheCopy(t *testing.T) {
	want := sequence(64, 5)
	s, buf := uploaded(t, 1, want)
	h, err := s.HostAlloc(4 * len(want))
	must(t, err)
	defer h.Free()
	for i := range h.Bytes() {
		h.Bytes()[i] = 0
	}
	release := holdBack(t, s)
	e, err := buf.DownloadAsync(tenferro.HostSlice[uint32](h))
	must(t, err)
	defer e.Close()
	if done, err := e.Done(); err != nil || done {
		t.Fatalf("a copy behind held-back work: Done %v, %v; want pending", done, err)
	}
	if got := tenferro.HostSlice[uint32](h); got[1] == want[1] {
		t.Fatal("the destination was written before the stream ran the copy")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = e.WaitContext(ctx)
	var pe *tenferro.PendingWorkError
	if !errors.As(err, &pe) || pe.Event != e || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitContext of a pending copy: %v", err)
	}
	// Free while the copy is queued is safe: the pool parks the block.
	if double != nil {
		h2, err := s.HostAlloc(64)
		must(t, err)
		e2, err := tenferro.DownloadAsync(s, h2.Bytes(), buf.Ptr())
		must(t, err)
		must(t, h2.Free())
		if st := hostStats(t, s.Runtime); st.PendingFrees != 1 {
			t.Fatalf("a block freed under a queued copy: %+v, want one pending free", st)
		}
		defer e2.Close()
	}
	release()
	must(t, e.Wait())
	if got := tenferro.HostSlice[uint32](h); !sameValues(got, want) {
		t.Fatalf("after Wait: %v..., want %v...", got[:4], want[:4])
	}
	must(t, s.Sync())
	if st := hostStats(t, s.Runtime); st.PendingFrees != 0 {
		t.Fatalf("after Sync: %+v, want no pending free", st)
	}
}

// Memory that is neither a block nor a registered range is refused, naming
// the two ways to get acceptable memory; nothing is copied synchronously.
func TestAsyncCopiesRefuseUntrackedMemory(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	s := bind(t, rt, 0)
	buf, err := tenferro.NewBuffer[byte](s, 16)
	must(t, err)
	defer buf.Free()
	_, err = buf.DownloadAsync(make([]byte, 16))
	asError(t, err, tenferro.StatusInvalidArgument, "tf_download_async", "tf_host_alloc", "tf_host_register")
	_, err = buf.UploadAsync(make([]byte, 16))
	asError(t, err, tenferro.StatusInvalidArgument, "tf_upload_async", "tf_host_alloc", "tf_host_register")
	h, err := s.HostAlloc(16)
	must(t, err)
	bytes := h.Bytes()
	must(t, h.Free())
	_, err = buf.DownloadAsync(bytes) // a freed block
	asError(t, err, tenferro.StatusInvalidArgument, "tf_download_async")
}

// Memory Go does not manage (mmap) registered for the runtime takes
// asynchronous copies both ways, and counts as registered until Unregister.
func TestRegisteredMemoryTakesAsyncCopies(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	s := bind(t, rt, 0)
	const n = 8192
	src, dst := mmapped(t, n), mmapped(t, n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	buf, err := tenferro.NewBuffer[byte](s, n)
	must(t, err)
	defer buf.Free()
	up, err := s.HostRegister(src)
	must(t, err)
	down, err := s.HostRegister(dst)
	must(t, err)
	if st := hostStats(t, rt); st.BytesRegistered != 2*n {
		t.Fatalf("two ranges of %d bytes registered: %+v", n, st)
	}
	e, err := buf.UploadAsync(up.Bytes())
	must(t, err)
	must(t, e.Wait())
	e.Close()
	e, err = buf.DownloadAsync(down.Bytes())
	must(t, err)
	must(t, e.Wait())
	e.Close()
	for i := range dst {
		if dst[i] != src[i] {
			t.Fatalf("byte %d: %d, want %d", i, dst[i], src[i])
		}
	}
	must(t, down.RecordUse(s))
	_, err = s.HostRegister(src[4096:])
	asError(t, err, tenferro.StatusInvalidArgument, "tf_host_register")
	must(t, up.Unregister())
	must(t, down.Unregister())
	must(t, down.Unregister())
	if down.Bytes() != nil {
		t.Fatal("an unregistered Registration still has its memory")
	}
	asError(t, down.RecordUse(s), tenferro.StatusInvalidHandle, "tf_host_record_use", "freed")
	if st := hostStats(t, rt); st.BytesRegistered != 0 {
		t.Fatalf("after Unregister: %+v", st)
	}
	_, err = s.HostRegister(nil)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_host_register")
}

// A Registration dropped without Unregister is unregistered by its
// finalizer, which releases its runtime reference.
func TestDroppedRegistrationIsUnregistered(t *testing.T) {
	d := requireDouble(t)
	rt, err := tenferro.NewRuntime(0)
	must(t, err)
	func() {
		_, err := rt.HostRegister(mmapped(t, 4096))
		must(t, err)
	}()
	closeRuntime(t, rt)
	for i := 0; i < 50 && d.PrimaryRefcount(0) != 0; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := d.PrimaryRefcount(0); n != 0 {
		t.Fatalf("primary context retained %d times after the Registration was dropped", n)
	}
	if n := d.Calls("cuMemHostUnregister"); n != 1 {
		t.Fatalf("cuMemHostUnregister called %d times, want 1 (by the finalizer)", n)
	}
}

// Driver failures reach the caller with the function that failed, and a
// failed HostAlloc or HostRegister holds no runtime reference.
func TestHostFailuresReachTheCaller(t *testing.T) {
	d := requireDouble(t)
	rt, err := tenferro.NewRuntime(0)
	must(t, err)
	d.Fail("cuMemHostAlloc", 1, testsupport.CudaErrorUnknown, 1)
	_, err = rt.HostAlloc(1 << 20)
	asError(t, err, tenferro.StatusCUDA, "tf_host_alloc")
	d.Fail("cuMemHostRegister", 1, testsupport.CudaErrorUnknown, 1)
	_, err = rt.HostRegister(mmapped(t, 4096))
	asError(t, err, tenferro.StatusCUDA, "tf_host_register")
	s := bind(t, rt, 0)
	buf, err := tenferro.NewBuffer[byte](s, 64)
	must(t, err)
	h, err := s.HostAlloc(64)
	must(t, err)
	d.Fail("cuMemcpyDtoHAsync", 1, testsupport.CudaErrorUnknown, 1)
	_, err = buf.DownloadAsync(h.Bytes())
	asError(t, err, tenferro.StatusCUDA, "tf_download_async")
	d.Fail("cuEventRecord", 1, testsupport.CudaErrorUnknown, 1)
	_, err = buf.UploadAsync(h.Bytes())
	asError(t, err, tenferro.StatusCUDA, "tf_event_record")
	must(t, s.Sync())
	must(t, h.Free())
	must(t, buf.Free())
	must(t, s.Close())
	closeRuntime(t, rt)
	if n := d.PrimaryRefcount(0); n != 0 {
		t.Fatalf("primary context retained %d times after every reference was released", n)
	}
}
