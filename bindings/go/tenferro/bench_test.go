// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// What the binding adds to the C calls (run with -test.bench=. on a GPU
// machine and compare with bench/bench_context's C numbers).  Built with
// -tags tenferro_linked the same benchmarks measure the library linked at
// build time instead of called through the table dlopen filled: the
// difference is the cost of the table (docs/go.md, "Loading the library").

// One cgo call of a function that does nothing but return a constant: the
// round trip Go -> C wrapper -> library, and the check that it is loaded.
func BenchmarkVersion(b *testing.B) {
	if tenferro.Version() == 0 {
		b.Skip("the library is not available")
	}
	for i := 0; i < b.N; i++ {
		if tenferro.Version() == 0 {
			b.Fatal("no version")
		}
	}
}

func benchRuntime(b *testing.B) *tenferro.Runtime {
	if double == nil && !tenferro.GPUAvailable() {
		b.Skip("no CUDA device")
	}
	rt, err := tenferro.NewRuntime(0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	return rt
}

func BenchmarkCurrentSlot(b *testing.B) {
	rt := benchRuntime(b)
	for i := 0; i < b.N; i++ {
		if _, err := rt.CurrentSlot(); err != nil {
			b.Fatal(err)
		}
	}
}

// A Stream's call: the same, through the bound handle.
func BenchmarkStreamCurrentSlot(b *testing.B) {
	rt := benchRuntime(b)
	s, err := rt.NewStream(0)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < b.N; i++ {
		if _, err := s.CurrentSlot(); err != nil {
			b.Fatal(err)
		}
	}
}

// Sync of an idle stream, blocking and with a context that can be
// cancelled (an event made, recorded, queried and released each time).
func BenchmarkSyncIdle(b *testing.B) {
	rt := benchRuntime(b)
	for i := 0; i < b.N; i++ {
		if err := rt.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSyncContextIdle(b *testing.B) {
	rt := benchRuntime(b)
	if double != nil {
		double.SetQueryProgress(1) // the double runs the event's record when queried
		defer double.SetQueryProgress(0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < b.N; i++ {
		if err := rt.SyncContext(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWithContext(b *testing.B) {
	rt := benchRuntime(b)
	fn := func() error { return nil }
	for i := 0; i < b.N; i++ {
		if err := rt.WithContext(fn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFailingCall(b *testing.B) {
	rt := benchRuntime(b)
	for i := 0; i < b.N; i++ {
		if _, err := rt.SlotStream(-1); err == nil {
			b.Fatal("no error")
		}
	}
}

// The binding's cost around the slot-locked calls, to compare with
// bench/bench_cublas and bench/bench_transfer (the raw C numbers): an empty
// callback measures the cgo round trip and the callback hand-over.

func BenchmarkStreamEnqueueEmpty(b *testing.B) {
	rt := benchRuntime(b)
	fn := func(unsafe.Pointer) error { return nil }
	for i := 0; i < b.N; i++ {
		if err := rt.StreamEnqueue(fn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCublasEnqueueEmpty(b *testing.B) {
	rt := benchRuntime(b)
	fn := func(*tenferro.Cublas) error { return nil }
	if err := rt.CublasEnqueue(tenferro.PointerModeHost, fn); err != nil {
		b.Skip("no cuBLAS:", err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := rt.CublasEnqueue(tenferro.PointerModeHost, fn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDownloadScalar4B(b *testing.B) {
	rt := benchRuntime(b)
	buf, err := tenferro.BufferFrom(rt, []float32{1})
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	for i := 0; i < b.N; i++ {
		if _, err := tenferro.DownloadScalar[float32](rt, buf.Ptr()); err != nil {
			b.Fatal(err)
		}
	}
}
