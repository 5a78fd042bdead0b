// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// A synchronous copy to or from page-locked memory whose stream wait fails
// leaves the copy queued (the double keeps it until the stream runs): the
// header says to keep the host memory until a later Sync of the slot, or
// leak it.  These tests free the memory at once, as `defer h.Close()` on
// the error path does, and check that the stale copy never reaches memory
// handed out again.

// filled is a device buffer of n bytes of value v, made through q and
// uploaded before the test's own work.
func filled(t *testing.T, q *tenferro.Stream, n int, v byte) *tenferro.Buffer[byte] {
	t.Helper()
	src := make([]byte, n)
	for i := range src {
		src[i] = v
	}
	buf, err := tenferro.BufferFrom(q, src)
	must(t, err)
	t.Cleanup(func() { buf.Free() })
	must(t, q.Sync())
	return buf
}

// failSync makes the next cuStreamSynchronize fail with code, once.
func failSync(d *testsupport.Double, code int) {
	d.Fail("cuStreamSynchronize", 1, code, 1)
}

// twoRuntimes is a runtime owning the memory, and a Stream on slot `slot`
// of another runtime (of slot+1 slots) with a device buffer of 4096 bytes
// of 0xcd: copies through the Stream, whose pool does not know the owner's
// memory.  Both runtimes are closed at the end of the test.
func twoRuntimes(t *testing.T, slot int) (*testsupport.Double, *tenferro.Runtime, *tenferro.Stream, *tenferro.Buffer[byte]) {
	t.Helper()
	d := requireDouble(t)
	owner := newRuntime(t, 1)
	t.Cleanup(func() { closeRuntime(t, owner) })
	other := newRuntime(t, slot+1)
	t.Cleanup(func() { closeRuntime(t, other) })
	s := bind(t, other, slot)
	return d, owner, s, filled(t, s, 4096, 0xcd)
}

// oneSlot is a runtime of one slot, closed at the end of the test, its
// Stream, and a device buffer of 4096 bytes of 0xcd.
func oneSlot(t *testing.T) (*testsupport.Double, *tenferro.Runtime, *tenferro.Stream, *tenferro.Buffer[byte]) {
	t.Helper()
	d := requireDouble(t)
	rt := newRuntime(t, 1)
	t.Cleanup(func() { closeRuntime(t, rt) })
	s := bind(t, rt, 0)
	return d, rt, s, filled(t, s, 4096, 0xcd)
}

// failedDownload downloads buf into dst through s with the stream wait
// failing with code, and checks the error.
func failedDownload(t *testing.T, d *testsupport.Double, s *tenferro.Stream, dst []byte,
	buf *tenferro.Buffer[byte], code int, status tenferro.Status) {
	t.Helper()
	failSync(d, code)
	asError(t, tenferro.Download(s, dst, buf.Ptr()), status, "tf_download", "cuStreamSynchronize")
}

// fresh allocates a block of n bytes through rt and writes 0x11 into it.
func fresh(t *testing.T, rt *tenferro.Runtime, n int) *tenferro.HostBuffer {
	t.Helper()
	h, err := rt.HostAlloc(n)
	must(t, err)
	t.Cleanup(func() { h.Close() })
	must(t, h.With(func(b []byte) {
		for i := range b {
			b[i] = 0x11
		}
	}))
	return h
}

func checkFirstByte(t *testing.T, h *tenferro.HostBuffer, want byte, what string) {
	t.Helper()
	must(t, h.With(func(b []byte) {
		if b[0] != want {
			t.Errorf("fresh[0] = %#x (was %#x): %s", b[0], want, what)
		}
	}))
}

func TestFailedDownloadNeverWritesTheNextBlock(t *testing.T) {
	d, rt, s, buf := oneSlot(t)
	h, err := s.HostAlloc(4096)
	must(t, err)
	failedDownload(t, d, s, h.UnsafeBytes(), buf, testsupport.CudaErrorUnknown, tenferro.StatusCUDA)
	must(t, h.Close()) // safe: the pool knows the slot's stream may still write it
	if st := hostStats(t, rt); st.PendingFrees != 1 {
		t.Fatalf("a block freed after a failed download: %+v, want it pending", st)
	}
	next := fresh(t, rt, 4096)
	must(t, s.Sync()) // the stream runs the copy that failed to be waited for
	checkFirstByte(t, next, 0x11, "the failed download's copy wrote the next block")
	if st := hostStats(t, rt); st.PendingFrees != 0 || st.BlocksCached != 1 {
		t.Fatalf("after the stream passed the copy: %+v, want the block cached again", st)
	}
}

// The same for an upload: the stale copy must read the data it was given,
// not the next owner's.
func TestFailedUploadNeverReadsTheNextBlock(t *testing.T) {
	d, rt, s, _ := oneSlot(t)
	buf := filled(t, s, 4096, 0)
	h, err := s.HostAlloc(4096)
	must(t, err)
	must(t, h.With(func(b []byte) { b[0] = 0xcd }))
	failSync(d, testsupport.CudaErrorUnknown)
	asError(t, tenferro.Upload(s, buf.Ptr(), h.UnsafeBytes()), tenferro.StatusCUDA, "tf_upload", "cuStreamSynchronize")
	must(t, h.Close())
	fresh(t, rt, 4096)
	must(t, s.Sync())
	got := make([]byte, 1)
	if !d.DeviceRead(uint64(buf.Ptr()), got) || got[0] != 0xcd {
		t.Fatalf("the device holds %#x after the failed upload ran, want 0xcd (0x11: it read the next block)", got[0])
	}
}

// A registered range is unregistered only after the stream that a failed
// download left its copy on has passed it: the memory may then be unmapped.
func TestFailedDownloadIntoRegisteredMemoryIsWaitedForAtClose(t *testing.T) {
	d, _, s, buf := oneSlot(t)
	mem, err := tenferro.MapHostMemory(4096)
	must(t, err)
	reg, err := s.HostRegister(mem.Ptr(), mem.Len())
	must(t, err)
	failedDownload(t, d, s, reg.Bytes(), buf, testsupport.CudaErrorUnknown, tenferro.StatusCUDA)
	must(t, reg.Close())
	must(t, mem.With(func(b []byte) {
		if b[0] != 0xcd {
			t.Errorf("mem[0] = %#x once the Registration is closed: the copy had not run before the range was unregistered", b[0])
		}
	}))
	must(t, mem.Close())
}

// ownProcessEnv names the test a process started by inOwnProcess runs.
const ownProcessEnv = "TENFERRO_GO_TEST_OWN_PROCESS"

// inOwnProcess runs the calling test again in a process of its own and
// reports its verdict there, for a test that leaks on purpose what lasts
// as long as the process (a page-locked block, and the primary context the
// library may keep for it); it returns true in that process, where the
// test then runs.
func inOwnProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(ownProcessEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), ownProcessEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s in a process of its own: %v\n%s", t.Name(), err, out)
	}
	return false
}

// When the runtime cannot even be told (a device fault), Close waits for
// the slot itself; that fails too, so the block is leaked, never reused.
// The leak lasts as long as the process, so the test runs in its own.
func TestBlockIsLeakedWhenTheFailedStreamCannotBeWaitedFor(t *testing.T) {
	requireDouble(t)
	if !inOwnProcess(t) {
		return
	}
	d, rt, s, buf := oneSlot(t)
	h, err := s.HostAlloc(4096)
	must(t, err)
	failedDownload(t, d, s, h.UnsafeBytes(), buf, testsupport.CudaErrorIllegalAddr, tenferro.StatusDeviceFault)
	err = h.Close()
	e := asError(t, err, tenferro.StatusDeviceFault, "tf_host_free", "leaked", "tf_download", "slot 0")
	if !errors.Is(err, tenferro.ErrLeaked) || e.Call != "" && e.Call != "cuStreamSynchronize" {
		t.Fatalf("Close of a block the device may still write: %+v, want ErrLeaked", e)
	}
	if st := hostStats(t, rt); st.BlocksInUse != 1 || st.BlocksCached != 0 {
		t.Fatalf("a leaked block: %+v, want it still in use and never cached", st)
	}
	must(t, h.Close()) // once only
}

// A block of one runtime downloaded into through another: the other's pool
// cannot be told, so Close waits for that runtime's slot first.
func TestFailedDownloadThroughAnotherRuntimeIsWaitedForAtClose(t *testing.T) {
	d, owner, s, buf := twoRuntimes(t, 1)
	h, err := owner.HostAlloc(4096)
	must(t, err)
	failedDownload(t, d, s, h.UnsafeBytes(), buf, testsupport.CudaErrorUnknown, tenferro.StatusCUDA)
	syncs := d.Calls("cuStreamSynchronize")
	must(t, h.Close())
	if n := d.Calls("cuStreamSynchronize") - syncs; n != 1 {
		t.Fatalf("Close made %d stream waits, want 1 (the other runtime's slot 1)", n)
	}
	next := fresh(t, owner, 4096)
	must(t, s.Sync())
	checkFirstByte(t, next, 0x11, "the other runtime's failed download wrote the next block")
}

// A Registration whose failed copy's stream cannot be waited for stays
// registered, and MapHostMemory keeps its memory mapped, until a later
// Close can wait.
func TestRegistrationStaysWhileTheFailedStreamCannotBeWaitedFor(t *testing.T) {
	d, owner, s, buf := twoRuntimes(t, 0)
	mem, err := tenferro.MapHostMemory(4096)
	must(t, err)
	reg, err := owner.HostRegister(mem.Ptr(), mem.Len())
	must(t, err)
	failedDownload(t, d, s, reg.Bytes(), buf, testsupport.CudaErrorUnknown, tenferro.StatusCUDA)
	failSync(d, testsupport.CudaErrorUnknown)
	asError(t, reg.Close(), tenferro.StatusCUDA, "tf_host_unregister", "the range stays registered", "tf_download", "slot 0")
	if reg.Ptr() == nil || hostStats(t, owner).BytesRegistered != 4096 {
		t.Fatal("a Registration whose failed copy could not be waited for was unregistered")
	}
	asError(t, mem.Close(), tenferro.StatusInvalidArgument, "munmap", "registered")
	must(t, reg.Close()) // the wait succeeds now: the copy ran
	must(t, mem.With(func(b []byte) {
		if b[0] != 0xcd {
			t.Errorf("mem[0] = %#x after the Registration was closed", b[0])
		}
	}))
	must(t, mem.Close())
}

// Go memory needs nothing kept: a failed download into it leaves no hold
// and no reference.
func TestFailedDownloadIntoGoMemoryKeepsNothing(t *testing.T) {
	d := requireDouble(t)
	rt, err := tenferro.NewRuntime(0)
	must(t, err)
	s, err := rt.NewStream(0)
	must(t, err)
	buf, err := tenferro.NewBuffer[byte](s, 4096)
	must(t, err)
	failedDownload(t, d, s, make([]byte, 4096), buf, testsupport.CudaErrorUnknown, tenferro.StatusCUDA)
	must(t, buf.Free())
	must(t, s.Close())
	closeRuntime(t, rt)
	if n := d.PrimaryRefcount(0); n != 0 {
		t.Fatalf("primary context retained %d times after every reference was closed", n)
	}
}
