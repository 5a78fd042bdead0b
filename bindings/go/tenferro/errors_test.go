// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// The binding's errors follow Go's conventions: errors.As finds the *Error
// and reads its Status through any wrapping, errors.Is compares statuses
// and tells the sentinel errors apart, and wrapping keeps the message.
func TestErrorsFollowGoConventions(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	_, err := rt.SlotStream(99)
	wrapped := fmt.Errorf("setting up: %w", err)
	var e *tenferro.Error
	var status tenferro.Status
	if !errors.As(wrapped, &e) || !errors.As(wrapped, &status) || e.Status != tenferro.StatusInvalidArgument ||
		status != e.Status {
		t.Fatalf("errors.As of %v: *Error %v, Status %v", wrapped, e, status)
	}
	if !errors.Is(wrapped, tenferro.StatusInvalidArgument) || errors.Is(wrapped, tenferro.StatusCUDA) {
		t.Fatalf("errors.Is of %v against statuses", wrapped)
	}
	for _, sentinel := range []error{tenferro.ErrNotAvailable, tenferro.ErrLibraryTooOld, tenferro.ErrLeaked} {
		if errors.Is(wrapped, sentinel) {
			t.Errorf("a refused slot is %v", sentinel)
		}
	}
	if wrapped.Error() != "setting up: "+e.Message {
		t.Fatalf("the wrapped message is %q", wrapped.Error())
	}
	sentinels := []error{tenferro.ErrNotAvailable, tenferro.ErrLibraryTooOld, tenferro.ErrLeaked}
	for i, a := range sentinels {
		for j, b := range sentinels {
			if (i == j) != errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, errors.Is(a, b))
			}
		}
	}
	if !errors.Is(tenferro.StatusNoDevice, tenferro.StatusNoDevice) || errors.As(errors.New("other"), &status) {
		t.Fatal("a Status is not its own errors.Is target, or errors.As read a Status from a foreign error")
	}
}
