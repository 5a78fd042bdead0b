// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"errors"
	"fmt"
)

// Error is the error every function of this package returns.  It is a copy
// of the library's error record (tf_error_info), taken on the OS thread that
// failed, so it is right whatever thread the goroutine runs on afterwards.
type Error struct {
	Status  Status     // the tf_status the call returned
	Domain  CodeDomain // what Code means
	Code    int32      // the CUresult, cublasStatus_t, ... (0 when Domain is CodeNone)
	Op      string     // the public function that failed, e.g. "tf_runtime_sync"
	Call    string     // the call inside it that failed, e.g. "cuStreamSynchronize", or ""
	Message string     // the library's full message, starting with Op
	Log     string     // NVRTC's whole log, for StatusCompile from Compile; else ""

	cause error // what a Go callback returned, ErrNotAvailable or ErrLibraryTooOld, for errors.Unwrap
}

// Error returns the library's message, followed by the callback's error
// when a Go callback failed.
func (e *Error) Error() string {
	if e.cause != nil {
		return e.Message + ": " + e.cause.Error()
	}
	return e.Message
}

// Unwrap returns the error a Go callback returned (WithContext,
// StreamEnqueue, CublasEnqueue: a CublasStatus for a failed cuBLAS call),
// ErrNotAvailable when the library could not be used at all,
// ErrLibraryTooOld when it lacks the function called, or nil.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is a Status equal to e.Status, so that
// errors.Is(err, StatusInvalidArgument) works.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// As sets a *Status target to e.Status, so that errors.As(err, &status)
// reads the status of an error however deeply it was wrapped.
func (e *Error) As(target interface{}) bool {
	s, ok := target.(*Status)
	if ok {
		*s = e.Status
	}
	return ok
}

// bindingError is an error detected by this package before the library was
// called (a value that does not fit the C type, a closed Runtime), shaped
// like the library's own: "op: detail".
func bindingError(status Status, op, format string, args ...interface{}) *Error {
	return &Error{
		Status:  status,
		Domain:  CodeNone,
		Op:      op,
		Message: op + ": " + fmt.Sprintf(format, args...),
	}
}

// ErrNotAvailable is what every function returns, wrapped in an *Error with
// StatusLibraryNotFound, when this program cannot use libtenferro_gpu.so.1
// at all: the package was built without cgo (CGO_ENABLED=0), or the library
// could not be loaded at run time (absent, of another major version, or
// older than the header the program was built with; the message says
// which).  A program that merely can use a GPU tests for it and carries on
// without one:
//
//	rt, err := tenferro.NewRuntime(0)
//	if errors.Is(err, tenferro.ErrNotAvailable) { ... run on the CPU ... }
//
// GPUAvailable is false in that case too.  A library that loads but finds
// no driver or device gives the library's own statuses (StatusDriverNotFound,
// StatusNoDevice, ...), not ErrNotAvailable.
var ErrNotAvailable = errors.New("tenferro: GPU support is not available")

// notAvailable is the error of op when the library cannot be used, why
// saying what happened.
func notAvailable(op, why string) *Error {
	e := bindingError(StatusLibraryNotFound, op, "%s", why)
	e.cause = ErrNotAvailable
	return e
}

// ErrLeaked is what HostBuffer.Free returns, wrapped in an *Error, when it
// leaked the block on purpose: the device may still write or read it (a
// synchronous Download or Upload through it failed, the runtime could not
// be told, and waiting for that call's stream failed too).  The block is
// never reused and stays allocated; do not touch it.  The *Error's Status
// and Message are those of the wait that failed.
var ErrLeaked = errors.New("tenferro: the memory was leaked on purpose, since the device may still use it")
