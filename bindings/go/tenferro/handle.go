package tenferro

// #include "shim.h"
import "C"

import "sync/atomic"

// handle owns one reference to a C tf_runtime and makes Close safe against
// calls in flight on other goroutines: each call holds a use count, and the
// reference is released by whichever comes last, Close or the final call.
//
// state = 2*uses + closedBit.  INVARIANT: once closedBit is set, uses only
// go down, so exactly one party sees state reach closedBit with no uses and
// releases the reference.
type handle struct {
	ptr   *C.tf_runtime
	state atomic.Int64
}

const closedBit = 1

// acquire returns the C pointer for one call, or an error naming op when the
// handle was closed.  Every successful acquire needs one release.
func (h *handle) acquire(op string) (*C.tf_runtime, error) {
	for {
		s := h.state.Load()
		if s&closedBit != 0 {
			return nil, bindingError(StatusInvalidHandle, op, "the Runtime was closed")
		}
		if h.state.CompareAndSwap(s, s+2) {
			return h.ptr, nil
		}
	}
}

// release ends one call; the last call after Close releases the reference.
func (h *handle) release() {
	if h.state.Add(-2) == closedBit {
		h.drop()
	}
}

// close marks the handle closed.  It returns the release's error when no
// call was in flight; otherwise the last call releases it later.  A second
// close reports that the Runtime was already closed.
func (h *handle) close() error {
	for {
		s := h.state.Load()
		if s&closedBit != 0 {
			return bindingError(StatusInvalidHandle, "tf_runtime_release", "the Runtime was already closed")
		}
		if h.state.CompareAndSwap(s, s|closedBit) {
			if s == 0 {
				return h.drop()
			}
			return nil
		}
	}
}

func (h *handle) drop() error {
	return takeError(C.go_tf_runtime_release(h.ptr))
}
