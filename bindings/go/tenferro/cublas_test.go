// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"errors"
	"math"
	"testing"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// gemmRef is C = alpha*op(A)*op(B) + beta*C on the host, column-major, in
// float64 (the reference for both precisions).
func gemmRef(ta, tb tenferro.Operation, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) {
	at := func(i, p int) float64 {
		if ta == tenferro.OpN {
			return a[i+p*lda]
		}
		return a[p+i*lda]
	}
	bt := func(p, j int) float64 {
		if tb == tenferro.OpN {
			return b[p+j*ldb]
		}
		return b[j+p*ldb]
	}
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			sum := 0.0
			for p := 0; p < k; p++ {
				sum += at(i, p) * bt(p, j)
			}
			c[i+j*ldc] = alpha*sum + beta*c[i+j*ldc]
		}
	}
}

func convert[T float32 | float64](x []float64) []T {
	out := make([]T, len(x))
	for i, v := range x {
		out[i] = T(v)
	}
	return out
}

// gemmCase is one GEMM with its operands on the host.
type gemmCase struct {
	ta, tb        tenferro.Operation
	m, n, k       int
	alpha, beta   float64
	a, b, c       []float64
	lda, ldb, ldc int
}

func newGemmCase(seed int64, ta, tb tenferro.Operation, m, n, k int) gemmCase {
	g := gemmCase{ta: ta, tb: tb, m: m, n: n, k: k, alpha: 1.5, beta: -0.5}
	g.lda, g.ldb, g.ldc = m, k, m+3 // ldc > m: rows past m must stay untouched
	if ta != tenferro.OpN {
		g.lda = k
	}
	if tb != tenferro.OpN {
		g.ldb = n
	}
	cols := func(op tenferro.Operation, notTrans, trans int) int {
		if op == tenferro.OpN {
			return notTrans
		}
		return trans
	}
	g.a = values(seed, g.lda*cols(ta, k, m))
	g.b = values(seed+1, g.ldb*cols(tb, n, k))
	g.c = values(seed+2, g.ldc*n)
	return g
}

// values are small integers and halves, so that float32 sums of a few
// hundred products stay exact enough to compare tightly.
func values(seed int64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64((int(seed)*31+i*17)%13-6) / 2
	}
	return out
}

func (g gemmCase) want() []float64 {
	c := append([]float64(nil), g.c...)
	gemmRef(g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
	return c
}

func closeTo(got, want []float64, tol float64) (int, bool) {
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) {
			return i, false
		}
	}
	return 0, true
}

// gemmOnDevice runs g in T's precision through rt (cublasSgemm_v2 or
// cublasDgemm_v2, alpha and beta as Go values or in device memory) and
// returns C.
func gemmOnDevice[T float32 | float64](rt *tenferro.Runtime, g gemmCase, deviceScalars bool) ([]float64, error) {
	var bufs [4]*tenferro.Buffer[T]
	for i, host := range [][]float64{g.a, g.b, g.c, {g.alpha, g.beta}} {
		buf, err := tenferro.BufferFrom(rt, convert[T](host))
		if err != nil {
			return nil, err
		}
		defer buf.Free()
		bufs[i] = buf
	}
	a, b, c, scalars := bufs[0].Ptr(), bufs[1].Ptr(), bufs[2].Ptr(), bufs[3].Ptr()
	var zero T
	size := int(unsafe.Sizeof(zero))
	mode := tenferro.PointerModeHost
	if deviceScalars {
		mode = tenferro.PointerModeDevice
	}
	err := rt.CublasEnqueue(mode, func(cb *tenferro.Cublas) error {
		switch {
		case size == 4 && deviceScalars:
			return cb.SgemmDeviceScalars(g.ta, g.tb, g.m, g.n, g.k, scalars, a, g.lda, b, g.ldb, scalars.Add(4), c, g.ldc)
		case size == 4:
			return cb.Sgemm(g.ta, g.tb, g.m, g.n, g.k, float32(g.alpha), a, g.lda, b, g.ldb, float32(g.beta), c, g.ldc)
		case deviceScalars:
			return cb.DgemmDeviceScalars(g.ta, g.tb, g.m, g.n, g.k, scalars, a, g.lda, b, g.ldb, scalars.Add(8), c, g.ldc)
		default:
			return cb.Dgemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, c, g.ldc)
		}
	})
	if err != nil {
		return nil, err
	}
	got, err := bufs[2].ToSlice() // after the GEMM: same slot
	return convertBack(got), err
}

func convertBack[T float32 | float64](x []T) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func cublasRuntime(t *testing.T, slots int) *tenferro.Runtime {
	t.Helper()
	rt := newRuntime(t, slots)
	t.Cleanup(func() { rt.Close() })
	requireCapability(t, rt, tenferro.CapCUBLAS, "cuBLAS")
	return rt
}

// SGEMM and DGEMM through the binding agree with a CPU reference, for
// every transpose combination and both pointer modes.
func TestGemmMatchesTheCPU(t *testing.T) {
	rt := bind(t, cublasRuntime(t, 2), 1)
	ops := []tenferro.Operation{tenferro.OpN, tenferro.OpT}
	seed := int64(1)
	for _, ta := range ops {
		for _, tb := range ops {
			for _, dev := range []bool{false, true} {
				seed++
				g := newGemmCase(seed, ta, tb, 37, 29, 45)
				want := g.want()
				got32, err32 := gemmOnDevice[float32](rt.Runtime, g, dev)
				got64, err64 := gemmOnDevice[float64](rt.Runtime, g, dev)
				if err32 != nil || err64 != nil {
					t.Fatalf("op %d%d device scalars %v: %v, %v", ta, tb, dev, err32, err64)
				}
				if i, ok := closeTo(got32, want, 1e-5); !ok {
					t.Fatalf("SGEMM op %d%d device scalars %v: element %d is %v, the CPU's %v", ta, tb, dev, i, got32[i], want[i])
				}
				if i, ok := closeTo(got64, want, 1e-12); !ok {
					t.Fatalf("DGEMM op %d%d device scalars %v: element %d is %v, the CPU's %v", ta, tb, dev, i, got64[i], want[i])
				}
			}
		}
	}
}

// The callback gets the slot's own handle and stream, on a bound Runtime
// whatever thread runs it.
func TestCublasEnqueueUsesTheSlot(t *testing.T) {
	rt := cublasRuntime(t, 3)
	want, err := rt.SlotStream(2)
	must(t, err)
	var handles [2]interface{}
	for i := range handles {
		must(t, bind(t, rt, 2).CublasEnqueue(tenferro.PointerModeHost, func(c *tenferro.Cublas) error {
			if c.Stream != want || c.Handle == nil || c.Mode != tenferro.PointerModeHost {
				t.Errorf("callback got stream %v handle %v mode %d, want stream %v", c.Stream, c.Handle, c.Mode, want)
			}
			handles[i] = c.Handle
			return nil
		}))
	}
	if handles[0] != handles[1] {
		t.Fatalf("the slot's handle changed: %v then %v", handles[0], handles[1])
	}
	v, err := tenferro.CublasVersion()
	if err != nil || v < 120000 {
		t.Fatalf("CublasVersion = %d, %v", v, err)
	}
	if fn, err := tenferro.CublasSymbol("cublasSgemm_v2"); err != nil || fn == nil {
		t.Fatalf("CublasSymbol(cublasSgemm_v2) = %v, %v", fn, err)
	}
	_, err = tenferro.CublasSymbol("malloc")
	asError(t, err, tenferro.StatusInvalidArgument, "tf_cublas_symbol", "'malloc' is not a cuBLAS symbol")
	_, err = tenferro.CublasSymbol("cublasNoSuchFunction")
	asError(t, err, tenferro.StatusNotSupported, "tf_cublas_symbol", "cublasNoSuchFunction")
}

var errNotCublas = errors.New("not cuBLAS's fault")

// What a callback returns or throws reaches the caller as the right error,
// and the slot is free again afterwards.
func TestCublasEnqueueErrors(t *testing.T) {
	rt := bind(t, cublasRuntime(t, 2), 0)
	c, err := tenferro.NewBuffer[float32](rt, 16)
	must(t, err)
	defer c.Free()

	// cuBLAS refuses lda < m: its status becomes StatusProvider.
	err = rt.CublasEnqueue(tenferro.PointerModeHost, func(cb *tenferro.Cublas) error {
		return cb.Sgemm(tenferro.OpN, tenferro.OpN, 4, 4, 4, 1, c.Ptr(), 1, c.Ptr(), 4, 0, c.Ptr(), 4)
	})
	e := asError(t, err, tenferro.StatusProvider, "tf_cublas_enqueue", "CUBLAS_STATUS_INVALID_VALUE (7)")
	if e.Domain != tenferro.CodeCUBLAS || e.Code != 7 || !errors.Is(err, tenferro.CublasStatusInvalidValue) {
		t.Fatalf("cuBLAS failure %+v (errors.Is status: %v)", e, errors.Is(err, tenferro.CublasStatusInvalidValue))
	}
	// Another Go error is the callback's failure.
	err = rt.CublasEnqueue(tenferro.PointerModeHost, func(*tenferro.Cublas) error { return errNotCublas })
	e = asError(t, err, tenferro.StatusCallback, "tf_cublas_enqueue", errNotCublas.Error())
	if !errors.Is(err, errNotCublas) || e.Call != "callback" {
		t.Fatalf("callback failure %+v", e)
	}
	// The wrong form for the pointer mode is refused before cuBLAS.
	err = rt.CublasEnqueue(tenferro.PointerModeDevice, func(cb *tenferro.Cublas) error {
		return cb.Sgemm(tenferro.OpN, tenferro.OpN, 4, 4, 4, 1, c.Ptr(), 4, c.Ptr(), 4, 0, c.Ptr(), 4)
	})
	asError(t, err, tenferro.StatusCallback, "tf_cublas_enqueue", "cublasSgemm_v2: this form takes alpha and beta as Go values")
	// A call that needs the slot it runs on is refused, not deadlocked.
	var inner error
	must(t, rt.CublasEnqueue(tenferro.PointerModeHost, func(*tenferro.Cublas) error {
		inner = rt.CublasEnqueue(tenferro.PointerModeHost, func(*tenferro.Cublas) error { return nil })
		return nil
	}))
	asError(t, inner, tenferro.StatusRuntimeState, "tf_cublas_enqueue")
	// A Cublas kept past its call is refused.
	var kept *tenferro.Cublas
	must(t, rt.CublasEnqueue(tenferro.PointerModeHost, func(cb *tenferro.Cublas) error { kept = cb; return nil }))
	asError(t, kept.Sgemm(tenferro.OpN, tenferro.OpN, 1, 1, 1, 1, c.Ptr(), 1, c.Ptr(), 1, 0, c.Ptr(), 1),
		tenferro.StatusInvalidArgument, "cublasSgemm_v2", "after its CublasEnqueue returned")
	err = rt.CublasEnqueue(tenferro.PointerMode(5), func(*tenferro.Cublas) error { return nil })
	asError(t, err, tenferro.StatusInvalidArgument, "tf_cublas_enqueue", "pointer_mode 5")
	asError(t, rt.CublasEnqueue(tenferro.PointerModeHost, nil), tenferro.StatusInvalidArgument, "tf_cublas_enqueue", "nil")
	err = rt.CublasEnqueue(tenferro.PointerModeHost, func(cb *tenferro.Cublas) error {
		return cb.Sgemm(tenferro.OpN, tenferro.OpN, 1<<40, 1, 1, 1, c.Ptr(), 1, c.Ptr(), 1, 0, c.Ptr(), 1)
	})
	asError(t, err, tenferro.StatusCallback, "tf_cublas_enqueue", "m 1099511627776 does not fit in int32_t")
}

// A panic in the callback continues after the library released the slot
// and restored the context.
func TestCublasEnqueueRepanics(t *testing.T) {
	rt := bind(t, cublasRuntime(t, 2), 1)
	func() {
		defer func() {
			if v := recover(); v != "in cuBLAS" {
				t.Fatalf("recovered %#v", v)
			}
		}()
		_ = rt.CublasEnqueue(tenferro.PointerModeHost, func(*tenferro.Cublas) error { panic("in cuBLAS") })
		t.Fatal("CublasEnqueue returned after a panic")
	}()
	must(t, rt.CublasEnqueue(tenferro.PointerModeHost, func(*tenferro.Cublas) error { return nil }))
}

// A failing cublasCreate_v2 reaches Go with its status; the next call
// starts over.
func TestCublasHandleCreationFailure(t *testing.T) {
	d := requireDouble(t)
	rt := bind(t, cublasRuntime(t, 1), 0)
	handles := d.Live(testsupport.CublasHandles)
	d.Fail("cublasCreate_v2", 1, testsupport.CublasExecutionFailed, 1)
	ran := false
	err := rt.CublasEnqueue(tenferro.PointerModeHost, func(*tenferro.Cublas) error { ran = true; return nil })
	e := asError(t, err, tenferro.StatusProvider, "tf_cublas_enqueue", "cublasCreate_v2", "CUBLAS_STATUS_EXECUTION_FAILED")
	if ran || e.Domain != tenferro.CodeCUBLAS || e.Code != testsupport.CublasExecutionFailed {
		t.Fatalf("ran %v, error %+v", ran, e)
	}
	must(t, rt.CublasEnqueue(tenferro.PointerModeHost, func(*tenferro.Cublas) error { ran = true; return nil }))
	if n := d.Live(testsupport.CublasHandles) - handles; !ran || n != 1 {
		t.Fatalf("after the fault: ran %v, %d handles made", ran, n)
	}
}
