// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"errors"
	"unsafe"
)

// callback carries one Go callback (WithContext, StreamEnqueue,
// CublasEnqueue) across the C library and back, with what became of it.
// Exactly one of its func fields is set.
type callback struct {
	context func() error
	stream  func(stream unsafe.Pointer) error
	cublas  func(c *Cublas) error
	mode    PointerMode // of the cuBLAS call

	err      error       // what the function returned
	returned bool        // it returned normally
	panicked bool        // it panicked (or called runtime.Goexit)
	panicVal interface{} // what it panicked with
}

// Codes the trampolines return to the library.  A Go error of a
// WithContext or StreamEnqueue callback becomes TF_ERROR_CALLBACK with code
// callbackFailed; a panic, or an error of a cuBLAS callback that is not a
// CublasStatus, returns callbackPanicked and the binding reports it itself.
const (
	callbackFailed   = 1
	callbackPanicked = -1
)

// run calls body, keeping a panic for the Go caller: a panic must never
// unwind through the library's C frames.
func (c *callback) run(body func() error) (code int32) {
	defer func() {
		if !c.returned {
			c.panicked = true
			c.panicVal = recover()
			code = callbackPanicked
		}
	}()
	c.err = body()
	c.returned = true
	return c.code()
}

func (c *callback) code() int32 {
	if c.err == nil {
		return 0
	}
	if c.cublas != nil {
		var st CublasStatus
		if errors.As(c.err, &st) && st != CublasStatusSuccess {
			return int32(st) // the library reports it as cuBLAS's failure
		}
		return callbackPanicked // not cuBLAS's: reported by the binding (finish)
	}
	return callbackFailed
}

// invoke makes one C call that runs c, then raises c's panic again, now
// that the library has restored the caller's context and released the
// slot, or folds c's error into the library's.
func (r *Runtime) invoke(op string, c *callback, call func(rt unsafe.Pointer, c *callback) error) error {
	err := r.do(op, func(p unsafe.Pointer) error { return call(p, c) })
	if c.panicked {
		panic(c.panicVal)
	}
	return c.finish(op, err)
}

func (c *callback) finish(op string, err error) error {
	if c.err == nil {
		return err
	}
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	if c.cublas != nil && c.code() == callbackPanicked {
		// The library saw an unknown cuBLAS status; say what happened.
		return &Error{Status: StatusCallback, Domain: CodeNone, Op: op, Call: "callback",
			Message: op + ": the callback failed", cause: c.err}
	}
	e.cause = c.err
	return e
}

// runCublas runs a CublasEnqueue callback with the handle and stream the
// library gave.
func (c *callback) runCublas(handle, stream unsafe.Pointer) int32 {
	cb := &Cublas{Handle: handle, Stream: stream, Mode: c.mode}
	defer cb.expire()
	return c.run(func() error { return c.cublas(cb) })
}

// WithContext runs fn with the runtime's primary context current on the OS
// thread the goroutine runs on, and restores the thread's previous context
// afterwards, whatever fn does (tf_with_context).  cgo keeps the goroutine
// on that thread until fn returns, so CUDA calls made by fn (through cgo)
// see the context.  Goroutines fn starts do not.
//
// When fn returns an error, WithContext returns an *Error with
// StatusCallback whose Unwrap is fn's error.  When fn panics, the context is
// restored and the panic continues from WithContext with the same value.
// fn must not call runtime.Goexit (t.FailNow, t.Skip): that would unwind
// through the library's C frames.  fn may call this package, WithContext
// included.
func (r *Runtime) WithContext(fn func() error) error {
	const op = "tf_with_context"
	if fn == nil {
		return bindingError(StatusInvalidArgument, op, "fn is nil")
	}
	return r.invoke(op, &callback{context: fn}, withContext)
}

// StreamEnqueue runs fn with the primary context current and the current
// slot's stream (a CUstream), so that work of any library (NCCL, cuFFT,
// your own driver calls through cgo) is queued in order with this
// package's work on that slot (tf_stream_enqueue).  The slot's lock is held
// while fn runs: a call from fn that needs the same slot (StreamEnqueue,
// CublasEnqueue, DownloadScalar) fails with StatusRuntimeState instead of
// deadlocking.  Errors and panics of fn are handled as in WithContext.
func (r *Runtime) StreamEnqueue(fn func(stream unsafe.Pointer) error) error {
	const op = "tf_stream_enqueue"
	if fn == nil {
		return bindingError(StatusInvalidArgument, op, "fn is nil")
	}
	return r.invoke(op, &callback{stream: fn}, streamEnqueue)
}
