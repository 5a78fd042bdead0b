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
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// mmapped is anonymous memory that Go does not manage, mapped by the test
// itself and unmapped at its end: one kind of what HostRegister takes.
func mmapped(t *testing.T, n int) []byte {
	t.Helper()
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	must(t, err)
	t.Cleanup(func() { syscall.Munmap(mem) })
	return mem
}

// register page-locks mem, memory Go does not manage, for q's runtime.
func register(q interface {
	HostRegister(unsafe.Pointer, int) (*tenferro.Registration, error)
}, mem []byte) (*tenferro.Registration, error) {
	return q.HostRegister(unsafe.Pointer(&mem[0]), len(mem))
}

func hostStats(t *testing.T, rt *tenferro.Runtime) tenferro.HostPoolStats {
	t.Helper()
	s, err := rt.HostStats()
	must(t, err)
	return s
}

// A HostBuffer is Len bytes of C memory seen through With and
// WithHostSlice, or the raw UnsafeBytes and UnsafeHostSlice (and the
// deprecated Bytes and HostSlice, the same views); Close is idempotent and
// leaves no view.
func TestHostBufferIsASliceOfPageLockedMemory(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	h, err := rt.HostAlloc(4096)
	must(t, err)
	if h.Len() != 4096 || len(h.UnsafeBytes()) != 4096 || h.Ptr() == nil || &h.Bytes()[0] != &h.UnsafeBytes()[0] {
		t.Fatalf("HostAlloc(4096): Len %d, len(UnsafeBytes) %d, Ptr %v", h.Len(), len(h.UnsafeBytes()), h.Ptr())
	}
	must(t, tenferro.WithHostSlice(h, func(floats []float32) {
		if len(floats) != 1024 || &floats[0] != &tenferro.UnsafeHostSlice[float32](h)[0] ||
			&floats[0] != &tenferro.HostSlice[float32](h)[0] {
			t.Errorf("WithHostSlice[float32] has %d values at %p, want 1024 at %p", len(floats), &floats[0], h.Ptr())
		}
		floats[1] = 1
	}))
	must(t, h.With(func(b []byte) {
		if len(b) != 4096 || b[4] != 0 || b[7] != 0x3f || b[6] != 0x80 {
			t.Errorf("the float32 1 written through WithHostSlice reads % x through With", b[4:8])
		}
	}))
	must(t, h.Close())
	must(t, h.Close())
	if h.UnsafeBytes() != nil || h.Ptr() != nil || tenferro.UnsafeHostSlice[float32](h) != nil || h.Len() != 0 {
		t.Fatal("a closed HostBuffer still has a view")
	}
	ran := false
	asError(t, h.With(func([]byte) { ran = true }), tenferro.StatusInvalidHandle, "HostBuffer.With", "closed")
	if ran {
		t.Fatal("With ran its function on a closed HostBuffer")
	}
	asError(t, h.RecordUse(rt), tenferro.StatusInvalidHandle, "tf_host_record_use", "closed")
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
	h.UnsafeBytes()[0] = 7
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
	copy(tenferro.UnsafeHostSlice[uint32](src), want)

	up, err := buf.UploadAsync(tenferro.UnsafeHostSlice[uint32](src))
	must(t, err)
	must(t, up.Wait())
	must(t, up.Close())
	down, err := tenferro.DownloadAsync(s, tenferro.UnsafeHostSlice[uint32](dst), buf.Ptr())
	must(t, err)
	must(t, down.Wait())
	if done, err := down.Done(); err != nil || !done {
		t.Fatalf("after Wait: Done %v, %v", done, err)
	}
	must(t, down.Close())
	if got := tenferro.UnsafeHostSlice[uint32](dst); !sameValues(got, want) {
		t.Fatalf("round trip: got %v..., want %v...", got[:4], want[:4])
	}
	part := tenferro.UnsafeHostSlice[uint32](dst)[8:16]
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
	for i := range h.UnsafeBytes() {
		h.UnsafeBytes()[i] = 0
	}
	release := holdBack(t, s)
	e, err := buf.DownloadAsync(tenferro.UnsafeHostSlice[uint32](h))
	must(t, err)
	defer e.Close()
	if done, err := e.Done(); err != nil || done {
		t.Fatalf("a copy behind held-back work: Done %v, %v; want pending", done, err)
	}
	if got := tenferro.UnsafeHostSlice[uint32](h); got[1] == want[1] {
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
		e2, err := tenferro.DownloadAsync(s, h2.UnsafeBytes(), buf.Ptr())
		must(t, err)
		must(t, h2.Free())
		if st := hostStats(t, s.Runtime); st.PendingFrees != 1 {
			t.Fatalf("a block freed under a queued copy: %+v, want one pending free", st)
		}
		defer e2.Close()
	}
	release()
	must(t, e.Wait())
	if got := tenferro.UnsafeHostSlice[uint32](h); !sameValues(got, want) {
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
	bytes := h.UnsafeBytes()
	must(t, h.Free())
	_, err = buf.DownloadAsync(bytes) // a freed block
	asError(t, err, tenferro.StatusInvalidArgument, "tf_download_async")
}

// Memory Go does not manage (the program's own mmap, MapHostMemory's, C's
// malloc) registered for the runtime takes asynchronous copies both ways,
// and counts as registered until the Registration is closed.
func TestRegisteredMemoryTakesAsyncCopies(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	s := bind(t, rt, 0)
	const n = 8192
	src := mmapped(t, n)
	mapped, err := tenferro.MapHostMemory(n)
	must(t, err)
	defer mapped.Close()
	dst := mapped.UnsafeBytes()
	cmem := testsupport.CMalloc(n)
	defer testsupport.CFree(cmem)
	for i := range src {
		src[i] = byte(i * 7)
	}
	buf, err := tenferro.NewBuffer[byte](s, n)
	must(t, err)
	defer buf.Free()
	up, err := register(s, src)
	must(t, err)
	down, err := s.HostRegister(mapped.Ptr(), mapped.Len())
	must(t, err)
	c, err := s.HostRegister(cmem, n)
	must(t, err)
	if st := hostStats(t, rt); st.BytesRegistered != 3*n {
		t.Fatalf("three ranges of %d bytes registered: %+v", n, st)
	}
	if up.Ptr() != unsafe.Pointer(&src[0]) || up.Len() != n || &up.Bytes()[0] != &src[0] {
		t.Fatalf("the Registration of %p: Ptr %p, Len %d", &src[0], up.Ptr(), up.Len())
	}
	e, err := buf.UploadAsync(up.Bytes())
	must(t, err)
	must(t, e.Wait())
	e.Close()
	for _, into := range [][]byte{dst, c.Bytes()} {
		e, err = buf.DownloadAsync(into)
		must(t, err)
		must(t, e.Wait())
		e.Close()
		for i := range into {
			if into[i] != src[i] {
				t.Fatalf("byte %d: %d, want %d", i, into[i], src[i])
			}
		}
	}
	must(t, down.RecordUse(s))
	_, err = register(s, src[4096:])
	asError(t, err, tenferro.StatusInvalidArgument, "tf_host_register")
	must(t, up.Close())
	must(t, down.Unregister()) // the name of 1.1
	must(t, down.Close())
	must(t, c.Close())
	if down.Bytes() != nil || down.Ptr() != nil || down.Len() != 0 {
		t.Fatal("an unregistered Registration still has its memory")
	}
	asError(t, down.RecordUse(s), tenferro.StatusInvalidHandle, "tf_host_record_use", "closed")
	if st := hostStats(t, rt); st.BytesRegistered != 0 {
		t.Fatalf("after Close: %+v", st)
	}
	_, err = s.HostRegister(nil, 64)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_host_register", "NULL")
	_, err = s.HostRegister(mapped.Ptr(), 0)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_host_register", "0")
	_, err = s.HostRegister(mapped.Ptr(), -1)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_host_register", "negative")
}

// A Registration dropped without Unregister is unregistered by its
// finalizer, which releases its runtime reference.
func TestDroppedRegistrationIsUnregistered(t *testing.T) {
	d := requireDouble(t)
	rt, err := tenferro.NewRuntime(0)
	must(t, err)
	func() {
		_, err := register(rt, mmapped(t, 4096))
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
	_, err = register(rt, mmapped(t, 4096))
	asError(t, err, tenferro.StatusCUDA, "tf_host_register")
	s := bind(t, rt, 0)
	buf, err := tenferro.NewBuffer[byte](s, 64)
	must(t, err)
	h, err := s.HostAlloc(64)
	must(t, err)
	d.Fail("cuMemcpyDtoHAsync", 1, testsupport.CudaErrorUnknown, 1)
	_, err = buf.DownloadAsync(h.UnsafeBytes())
	asError(t, err, tenferro.StatusCUDA, "tf_download_async")
	d.Fail("cuEventRecord", 1, testsupport.CudaErrorUnknown, 1)
	_, err = buf.UploadAsync(h.UnsafeBytes())
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
