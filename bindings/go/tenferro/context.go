package tenferro

// #include "shim.h"
import "C"

import "runtime/cgo"

// contextCall carries one WithContext callback across the C library and
// back, with what became of it.
type contextCall struct {
	fn       func() error
	err      error       // what fn returned
	returned bool        // fn returned normally
	panicked bool        // fn panicked (or called runtime.Goexit)
	panicVal interface{} // what fn panicked with
}

// callbackPanicked is the code the C trampoline returns when fn panicked;
// the panic is raised again once the library has restored the context.
const callbackPanicked = -1

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
	call := &contextCall{fn: fn}
	h := cgo.NewHandle(call)
	defer h.Delete()
	err := r.do(op, func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_with_context(p, C.uintptr_t(h))
	})
	if call.panicked {
		panic(call.panicVal)
	}
	if e, ok := err.(*Error); ok && call.err != nil {
		e.cause = call.err
	}
	return err
}

//export tfgoRunContextCallback
func tfgoRunContextCallback(h C.uintptr_t) (code C.int32_t) {
	call := cgo.Handle(h).Value().(*contextCall)
	defer func() {
		if !call.returned {
			// A panic must not unwind through C: keep it for WithContext.
			call.panicked = true
			call.panicVal = recover()
			code = callbackPanicked
		}
	}()
	call.err = call.fn()
	call.returned = true
	if call.err != nil {
		return 1
	}
	return 0
}
