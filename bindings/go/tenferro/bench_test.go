package tenferro_test

import (
	"testing"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// What the binding adds to the C calls (run with -test.bench=. on a GPU
// machine and compare with bench/bench_context's C numbers).

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
