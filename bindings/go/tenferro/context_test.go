// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// withCallerContext runs body on a locked OS thread whose current context
// is a context of the test's own (made by the double, or by the real
// driver's cuCtxCreate), and checks that it is current again afterwards.
func withCallerContext(t *testing.T, body func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mine := testsupport.CreateContext(0)
	defer testsupport.DestroyContext(mine)
	saved := testsupport.CurrentContext()
	testsupport.SetCurrentContext(mine)
	defer testsupport.SetCurrentContext(saved)
	body()
	if got := testsupport.CurrentContext(); got != mine {
		t.Fatalf("the caller's context %v was not restored: %v is current", mine, got)
	}
}

func TestWithContextMakesThePrimaryCurrent(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	primary, err := rt.PrimaryContext()
	must(t, err)
	withCallerContext(t, func() {
		ran := false
		err := rt.WithContext(func() error {
			ran = true
			if got := testsupport.CurrentContext(); got != primary {
				t.Errorf("inside: %v is current, want the primary %v", got, primary)
			}
			// Nested calls work and keep the primary current.
			return rt.WithContext(func() error { return nil })
		})
		if err != nil || !ran {
			t.Fatalf("WithContext = %v, ran %v", err, ran)
		}
	})
}

var errMine = errors.New("my callback's failure")

func TestWithContextReturnsTheCallbacksError(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	withCallerContext(t, func() {
		err := rt.WithContext(func() error { return errMine })
		e := asError(t, err, tenferro.StatusCallback, "tf_with_context", errMine.Error())
		if !errors.Is(err, errMine) || e.Domain != tenferro.CodeCallback || e.Code != 1 || e.Call != "callback" {
			t.Fatalf("callback error %+v (errors.Is mine: %v)", e, errors.Is(err, errMine))
		}
	})
	asError(t, rt.WithContext(nil), tenferro.StatusInvalidArgument, "tf_with_context", "nil")
}

type myPanic struct{ n int }

// A panic in the callback is carried over the C frames and raised again
// once the context is restored; the runtime stays usable.
func TestWithContextRepanicsAfterRestoring(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	withCallerContext(t, func() {
		defer func() {
			v := recover()
			if p, ok := v.(myPanic); !ok || p.n != 42 {
				t.Fatalf("recovered %#v, want myPanic{42}", v)
			}
		}()
		_ = rt.WithContext(func() error { panic(myPanic{42}) })
		t.Fatal("WithContext returned after a panic")
	})
	// The slot the panicking call held is free again.
	for i := 0; i < 3; i++ {
		if err := rt.WithContext(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// A driver failure to activate the context is an error with the call and
// code; the callback never runs.
func TestWithContextActivationFailure(t *testing.T) {
	d := requireDouble(t)
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	withCallerContext(t, func() {
		d.Fail("cuCtxSetCurrent", 1, testsupport.CudaErrorUnknown, 1)
		ran := false
		err := rt.WithContext(func() error { ran = true; return nil })
		e := asError(t, err, tenferro.StatusCUDA, "tf_with_context", "cuCtxSetCurrent")
		if ran || e.Code != testsupport.CudaErrorUnknown || e.Unwrap() != nil {
			t.Fatalf("ran %v, error %+v", ran, e)
		}
	})
}
