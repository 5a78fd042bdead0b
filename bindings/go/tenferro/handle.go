// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"sync/atomic"
	"unsafe"
)

// handle owns one reference to a reference-counted C object (a tf_runtime,
// tf_event, tf_module or tf_program) and makes Close safe against calls in
// flight on other goroutines: each call holds a use count, and the
// reference is released by whichever comes last, Close or the final call.
//
// state = 2*uses + closedBit.  INVARIANT: once closedBit is set, uses only
// go down, so exactly one party sees state reach closedBit with no uses and
// releases the reference.
type handle struct {
	ptr       unsafe.Pointer
	state     atomic.Int64
	kind      string                     // "Runtime", "Event", ... for messages
	releaseOp string                     // the C function that drops the reference
	drop      func(unsafe.Pointer) error // calls it
}

const closedBit = 1

func newHandle(ptr unsafe.Pointer, kind, releaseOp string, drop func(unsafe.Pointer) error) *handle {
	return &handle{ptr: ptr, kind: kind, releaseOp: releaseOp, drop: drop}
}

// acquire returns the C pointer for one call, or an error naming op when the
// handle was closed.  Every successful acquire needs one release.
func (h *handle) acquire(op string) (unsafe.Pointer, error) {
	if h == nil {
		return nil, errNotOpen(op)
	}
	for {
		s := h.state.Load()
		if s&closedBit != 0 {
			return nil, bindingError(StatusInvalidHandle, op, "the %s was closed", h.kind)
		}
		if h.state.CompareAndSwap(s, s+2) {
			return h.ptr, nil
		}
	}
}

// release ends one call; the last call after Close releases the reference.
func (h *handle) release() {
	if h.state.Add(-2) == closedBit {
		h.drop(h.ptr) // nobody to report to: the closer already returned
	}
}

// close marks the handle closed.  It returns the release's error when no
// call was in flight; otherwise the last call releases it later.  A second
// close reports that the object was already closed.
func (h *handle) close() error {
	if h == nil {
		return errNotOpen("close")
	}
	for {
		s := h.state.Load()
		if s&closedBit != 0 {
			return bindingError(StatusInvalidHandle, h.releaseOp, "the %s was already closed", h.kind)
		}
		if h.state.CompareAndSwap(s, s|closedBit) {
			if s == 0 {
				return h.drop(h.ptr)
			}
			return nil
		}
	}
}

// errNotOpen is the error of a call on a nil or zero Runtime, Stream,
// Event, Module or Program: one this package did not make.
func errNotOpen(op string) error {
	return bindingError(StatusInvalidHandle, op, "the object is nil or a zero value, not one this package made")
}

// use runs call with the C pointer held for its duration.
func (h *handle) use(op string, call func(unsafe.Pointer) error) error {
	p, err := h.acquire(op)
	if err != nil {
		return err
	}
	defer h.release()
	return call(p)
}

// useBoth runs call with the C pointers of two handles held.
func useBoth(op string, a, b *handle, call func(pa, pb unsafe.Pointer) error) error {
	return a.use(op, func(pa unsafe.Pointer) error {
		return b.use(op, func(pb unsafe.Pointer) error { return call(pa, pb) })
	})
}
