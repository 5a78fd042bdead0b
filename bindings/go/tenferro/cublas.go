// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// PointerMode says where cuBLAS reads alpha and beta and writes scalar
// results (enum tf_cublas_pointer_mode).
type PointerMode int32

// Pointer modes for CublasEnqueue.
const (
	PointerModeHost   PointerMode = 0 // Go values
	PointerModeDevice PointerMode = 1 // device memory
)

// Cublas is what a CublasEnqueue callback receives: the current slot's
// cuBLAS handle and stream.  It is valid only until the callback returns.
type Cublas struct {
	Handle unsafe.Pointer // the slot's cublasHandle_t: never destroy it or change its stream
	Stream unsafe.Pointer // the slot's CUstream
	Mode   PointerMode    // the pointer mode set for this call

	expired atomic.Bool
}

func (c *Cublas) expire() { c.expired.Store(true) }

// CublasEnqueue runs fn with the current slot's cuBLAS handle, its pointer
// mode set to mode, and the primary context current (tf_cublas_enqueue).
// The handle is created at the slot's first call (cuBLAS is loaded then),
// bound to the slot's stream, and kept until the runtime is torn down.
// The slot's lock is held until fn returns.
//
// fn returns nil, or the CublasStatus of a failed cuBLAS call (what the
// Sgemm and Dgemm helpers return): CublasEnqueue then returns an *Error
// with StatusProvider naming the status, which unwraps to the CublasStatus.
// Any other error of fn gives an *Error with StatusCallback that unwraps to
// it.  A panic in fn continues from CublasEnqueue once the library has
// restored the context and released the slot.
func (r *Runtime) CublasEnqueue(mode PointerMode, fn func(c *Cublas) error) error {
	const op = "tf_cublas_enqueue"
	if fn == nil {
		return bindingError(StatusInvalidArgument, op, "fn is nil")
	}
	return r.invoke(op, &callback{cublas: fn, mode: mode}, cublasEnqueue)
}

// CublasStatus is a cublasStatus_t, the result of a cuBLAS call; nonzero
// values are errors.
type CublasStatus int32

// cuBLAS statuses (cublas_api.h).
const (
	CublasStatusSuccess         CublasStatus = 0
	CublasStatusNotInitialized  CublasStatus = 1
	CublasStatusAllocFailed     CublasStatus = 3
	CublasStatusInvalidValue    CublasStatus = 7
	CublasStatusArchMismatch    CublasStatus = 8
	CublasStatusMappingError    CublasStatus = 11
	CublasStatusExecutionFailed CublasStatus = 13
	CublasStatusInternalError   CublasStatus = 14
	CublasStatusNotSupported    CublasStatus = 15
	CublasStatusLicenseError    CublasStatus = 16
)

var cublasStatusNames = map[CublasStatus]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// Error is the status's name and value, "CUBLAS_STATUS_INVALID_VALUE (7)".
func (s CublasStatus) Error() string {
	name, ok := cublasStatusNames[s]
	if !ok {
		name = "unknown cuBLAS status"
	}
	return fmt.Sprintf("%s (%d)", name, int32(s))
}

// Operation is a cublasOperation_t: how a GEMM operand is used.
type Operation int32

// GEMM operand operations.
const (
	OpN Operation = 0 // as stored (column-major)
	OpT Operation = 1 // transposed
	OpC Operation = 2 // conjugate transposed
)

// CublasVersion is the version of the cuBLAS the library loaded, as
// major*10000 + minor*100 + patch (tf_cublas_version).  It loads cuBLAS.
func CublasVersion() (int, error) { return cublasVersion() }

// CublasSymbol is the address of a function of the cuBLAS the library
// loaded ("cublasSgemm_v2"), for calling it through your own cgo code with
// the handle CublasEnqueue gives (tf_cublas_symbol).
func CublasSymbol(name string) (unsafe.Pointer, error) { return cublasSymbol(name) }

// symbolCache keeps a cuBLAS function's address once found; a failure is
// not kept, so a later call asks the library again.
type symbolCache struct {
	name string
	fn   atomic.Pointer[byte]
}

func (s *symbolCache) get() (unsafe.Pointer, error) {
	if p := s.fn.Load(); p != nil {
		return unsafe.Pointer(p), nil
	}
	fn, err := CublasSymbol(s.name)
	if err != nil {
		return nil, err
	}
	s.fn.Store((*byte)(fn))
	return fn, nil
}

var (
	sgemmSymbol = symbolCache{name: "cublasSgemm_v2"}
	dgemmSymbol = symbolCache{name: "cublasDgemm_v2"}
)

// gemmArgs are the integer arguments of a GEMM, checked to fit cuBLAS's int.
type gemmArgs struct{ m, n, k, lda, ldb, ldc int32 }

func (c *Cublas) gemmArgs(op string, want PointerMode, m, n, k, lda, ldb, ldc int) (gemmArgs, error) {
	var g gemmArgs
	if c.expired.Load() {
		return g, bindingError(StatusInvalidArgument, op, "the Cublas was used after its CublasEnqueue returned")
	}
	if c.Mode != want {
		return g, bindingError(StatusInvalidArgument, op,
			"this form takes alpha and beta %s, but the CublasEnqueue's pointer mode is %d",
			map[PointerMode]string{PointerModeHost: "as Go values", PointerModeDevice: "in device memory"}[want], c.Mode)
	}
	var err error
	for _, a := range []struct {
		dst  *int32
		name string
		v    int
	}{{&g.m, "m", m}, {&g.n, "n", n}, {&g.k, "k", k}, {&g.lda, "lda", lda}, {&g.ldb, "ldb", ldb}, {&g.ldc, "ldc", ldc}} {
		if *a.dst, err = int32Arg(op, a.name, a.v); err != nil {
			return g, err
		}
	}
	return g, nil
}

// gemmOperands are a GEMM's arguments but alpha and beta, for the C call.
type gemmOperands struct {
	fn, handle              unsafe.Pointer
	transA, transB          int32
	args                    gemmArgs
	alphaDev, a, b, betaDev DevicePtr
	c                       DevicePtr
}

// gemm checks the arguments, finds the cuBLAS function and calls it.
// alpha and beta are host values, or nil to read alphaDev and betaDev
// from device memory; a nonzero cublasStatus_t becomes a CublasStatus.
func gemm[T float32 | float64](c *Cublas, ta, tb Operation, m, n, k int, alpha *T, alphaDev, a DevicePtr,
	lda int, b DevicePtr, ldb int, beta *T, betaDev, cm DevicePtr, ldc int) error {
	sym, mode := &sgemmSymbol, PointerModeHost
	if _, double := any(alpha).(*float64); double {
		sym = &dgemmSymbol
	}
	if alpha == nil {
		mode = PointerModeDevice
	}
	g, err := c.gemmArgs(sym.name, mode, m, n, k, lda, ldb, ldc)
	if err != nil {
		return err
	}
	fn, err := sym.get()
	if err != nil {
		return err
	}
	ops := gemmOperands{fn: fn, handle: c.Handle, transA: int32(ta), transB: int32(tb), args: g,
		alphaDev: alphaDev, a: a, b: b, betaDev: betaDev, c: cm}
	if status := gemmCall(&ops, sym == &dgemmSymbol, unsafe.Pointer(alpha), unsafe.Pointer(beta)); status != 0 {
		return CublasStatus(status)
	}
	return nil
}

// Sgemm queues C = alpha*op(A)*op(B) + beta*C in single precision on the
// callback's handle (cublasSgemm_v2 of the library's cuBLAS).  Matrices
// are column-major device memory; the pointer mode must be
// PointerModeHost.  It returns nil, a CublasStatus, or an *Error when an
// argument does not fit cuBLAS's int or the mode is wrong.
func (c *Cublas) Sgemm(transA, transB Operation, m, n, k int, alpha float32, a DevicePtr, lda int,
	b DevicePtr, ldb int, beta float32, cm DevicePtr, ldc int) error {
	return gemm(c, transA, transB, m, n, k, &alpha, 0, a, lda, b, ldb, &beta, 0, cm, ldc)
}

// SgemmDeviceScalars is Sgemm with alpha and beta read from device memory
// (one float32 each); the pointer mode must be PointerModeDevice.
func (c *Cublas) SgemmDeviceScalars(transA, transB Operation, m, n, k int, alpha, a DevicePtr, lda int,
	b DevicePtr, ldb int, beta, cm DevicePtr, ldc int) error {
	return gemm[float32](c, transA, transB, m, n, k, nil, alpha, a, lda, b, ldb, nil, beta, cm, ldc)
}

// Dgemm is Sgemm in double precision (cublasDgemm_v2).
func (c *Cublas) Dgemm(transA, transB Operation, m, n, k int, alpha float64, a DevicePtr, lda int,
	b DevicePtr, ldb int, beta float64, cm DevicePtr, ldc int) error {
	return gemm(c, transA, transB, m, n, k, &alpha, 0, a, lda, b, ldb, &beta, 0, cm, ldc)
}

// DgemmDeviceScalars is Dgemm with alpha and beta read from device memory
// (one float64 each); the pointer mode must be PointerModeDevice.
func (c *Cublas) DgemmDeviceScalars(transA, transB Operation, m, n, k int, alpha, a DevicePtr, lda int,
	b DevicePtr, ldb int, beta, cm DevicePtr, ldc int) error {
	return gemm[float64](c, transA, transB, m, n, k, nil, alpha, a, lda, b, ldb, nil, beta, cm, ldc)
}
