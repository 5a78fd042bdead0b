// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"fmt"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// randomFloats returns n values that differ from each other and from 0.
func randomFloats(seed int64, n int) []float32 {
	r := rand.New(rand.NewSource(seed))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i+1) + r.Float32()
	}
	return out
}

// checkRoundTrip uploads n float32s through rt and downloads them again,
// in pieces that start and end inside elements' neighbours, and compares.
func checkRoundTrip(t *testing.T, rt tenferro.Queue, n int) {
	t.Helper()
	src := randomFloats(int64(n), n)
	buf, err := tenferro.BufferFrom(rt, src)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	got, err := buf.ToSlice()
	if err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if got[i] != src[i] {
			t.Fatalf("n=%d: element %d came back as %v, want %v", n, i, got[i], src[i])
		}
	}
}

// bufferPair makes a buffer holding src and an empty one of its size
// through rt, both freed when the test ends.
func bufferPair(t *testing.T, rt tenferro.Queue, src []float32) (*tenferro.Buffer[float32], *tenferro.Buffer[float32]) {
	t.Helper()
	x, err := tenferro.BufferFrom(rt, src)
	must(t, err)
	t.Cleanup(func() { x.Free() })
	y, err := tenferro.NewBuffer[float32](rt, len(src))
	must(t, err)
	t.Cleanup(func() { y.Free() })
	return x, y
}

// Sizes through every download path: the driver's pageable copy (up to 64
// KiB), the pipelined staging (above, with a partial last chunk), and one
// element.
func TestUploadDownloadRoundTrips(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	worker := bind(t, rt, 1)
	for _, n := range []int{1, 3, 1000, 16 << 10, 16<<10 + 1, 3<<20 + 7} {
		checkRoundTrip(t, worker, n)
	}
}

// Every element type crosses as its own bytes.
func TestTypedTransfers(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	worker := bind(t, rt, 0)
	roundTrip(t, worker, []int8{-1, 2, -3})
	roundTrip(t, worker, []uint16{1, 65535})
	roundTrip(t, worker, []int64{-1 << 40, 7})
	roundTrip(t, worker, []float64{3.25, -1e300})
	roundTrip(t, worker, []complex128{complex(1, -2), complex(-3.5, 4)})
	type celsius float32 // ~float32 is accepted
	roundTrip(t, worker, []celsius{-40, 100})
}

func roundTrip[T tenferro.Scalar](t *testing.T, rt tenferro.Queue, src []T) {
	t.Helper()
	b, err := tenferro.BufferFrom(rt, src)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	got := make([]T, len(src))
	must(t, tenferro.Download(rt, got, b.Ptr()))
	if fmt.Sprint(got) != fmt.Sprint(src) {
		t.Fatalf("%T came back as %v, want %v", src, got, src)
	}
	last, err := tenferro.DownloadScalar[T](rt, b.Ptr().Add((len(src)-1)*int(unsafe.Sizeof(src[0]))))
	if err != nil || last != src[len(src)-1] {
		t.Fatalf("DownloadScalar of the last %T: %v, %v", src[0], last, err)
	}
}

func TestCopyAndPeerCopyOnOneDevice(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	other := newRuntime(t, 2)
	defer closeRuntime(t, other)
	a, b := bind(t, rt, 0), bind(t, other, 0)
	src := randomFloats(7, 5000)
	x, y := bufferPair(t, a, src)
	z, err := tenferro.NewBuffer[float32](b, len(src))
	must(t, err)
	defer z.Free()

	must(t, a.Copy(y.Ptr(), x.Ptr(), 4*len(src)))
	ok, err := a.PeerCopyAvailable(b)
	if err != nil || !ok {
		t.Fatalf("PeerCopyAvailable on one device = %v, %v (always true)", ok, err)
	}
	must(t, a.PeerCopy(b, z.Ptr(), y.Ptr(), 4*len(src)))
	must(t, a.Sync()) // b's streams do not wait for a's copy
	got, err := z.ToSlice()
	must(t, err)
	for i := range src {
		if got[i] != src[i] {
			t.Fatalf("element %d: %v after Copy and PeerCopy, want %v", i, got[i], src[i])
		}
	}
	_, err = a.PeerCopyAvailable(nil)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_peer_copy_available", "nil")
}

func TestMemoryBadInput(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	if p, err := rt.Alloc(0); err != nil || p != 0 {
		t.Fatalf("Alloc(0) = %v, %v", p, err)
	}
	must(t, rt.Free(0))
	_, err := rt.Alloc(-1)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_alloc", "bytes -1 is negative")
	host := make([]byte, 64)
	hostAddr := tenferro.DevicePtr(uintptr(unsafe.Pointer(&host[8])))
	_, err = tenferro.DownloadScalar[uint32](rt, hostAddr)
	e := asError(t, err, tenferro.StatusInvalidArgument, "tf_download_scalar", hostAddr.String(), "is not device memory")
	if e.Call != "cuMemGetAddressRange" || e.Domain != tenferro.CodeCUDA {
		t.Fatalf("a host address: %+v", e)
	}
	b, err := tenferro.NewBuffer[uint32](rt, 4)
	must(t, err)
	defer b.Free()
	asError(t, tenferro.Download(rt, make([]uint32, 5), b.Ptr()), tenferro.StatusInvalidArgument,
		"tf_download", "crosses the end of its allocation")
	asError(t, tenferro.Upload(rt, b.Ptr().Add(4), []uint32{1, 2, 3, 4}), tenferro.StatusInvalidArgument,
		"tf_upload", "crosses the end")
	asError(t, b.Upload(make([]uint32, 5)), tenferro.StatusInvalidArgument, "tf_upload", "do not fit")
	asError(t, rt.Copy(b.Ptr(), b.Ptr(), -4), tenferro.StatusInvalidArgument, "tf_copy", "negative")
	// Empty transfers check nothing and do nothing.
	must(t, tenferro.Upload(rt, 0, []float32(nil)))
	must(t, tenferro.Download(rt, []float32{}, 0))
	must(t, b.Free())
	must(t, b.Free()) // the second does nothing
}

// A failing driver call inside a transfer reaches Go with its call, code
// and the operation.
func TestTransferDriverFailure(t *testing.T) {
	d := requireDouble(t)
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	allocs := d.Live(testsupport.DeviceAllocs)
	b, err := tenferro.BufferFrom(rt, []float32{1, 2})
	must(t, err)
	defer b.Free()
	d.Fail("cuStreamQuery", 1, testsupport.CudaErrorUnknown, 1)
	_, err = tenferro.DownloadScalar[float32](rt, b.Ptr())
	e := asError(t, err, tenferro.StatusCUDA, "tf_download_scalar", "cuStreamQuery", "CUDA_ERROR_UNKNOWN (999)")
	if e.Code != testsupport.CudaErrorUnknown || e.Domain != tenferro.CodeCUDA {
		t.Fatalf("error record %+v", e)
	}
	if v, err := tenferro.DownloadScalar[float32](rt, b.Ptr().Add(4)); err != nil || v != 2 {
		t.Fatalf("after the fault: %v, %v", v, err)
	}
	if n := d.Live(testsupport.DeviceAllocs) - allocs; n != 1 {
		t.Fatalf("%d device allocations made, want the buffer's 1", n)
	}
}
