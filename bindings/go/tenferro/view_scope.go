// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"sync"
	"unsafe"
)

// viewScope is the lifetime of memory that With lends out as a slice (a
// HostBuffer's block, a HostMemory mapping): Close marks it closed at once
// (no new view), but the memory goes away only when no With runs, so the
// slice fn holds stays valid until fn returns, whoever closes meanwhile (fn
// itself: never a deadlock).  The zero value is open.
type viewScope struct {
	mu     sync.Mutex
	closed bool
	users  int // With calls running
	done   bool
}

// lend runs fn with the n bytes at p unless the scope was closed (an error
// with StatusInvalidHandle naming op and kind); the last With to return
// after a Close runs release and returns its error.
func (s *viewScope) lend(op, kind string, p unsafe.Pointer, n int, fn func([]byte), release func() error) (err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return bindingError(StatusInvalidHandle, op, "the %s was closed", kind)
	}
	s.users++
	s.mu.Unlock()
	defer func() {
		if s.leave() {
			if rerr := release(); err == nil {
				err = rerr
			}
		}
	}()
	fn(unsafe.Slice((*byte)(p), n))
	return nil
}

// leave ends a With: true when it must release.
func (s *viewScope) leave() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users--
	return s.takeRelease()
}

// close marks the scope closed: true when the caller must release now,
// false when it was closed before or a With will.
func (s *viewScope) close() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.takeRelease()
}

// takeRelease: closed, no With running, not released yet.  Called locked.
func (s *viewScope) takeRelease() bool {
	if !s.closed || s.users > 0 || s.done {
		return false
	}
	s.done = true
	return true
}

// isClosed reports whether Close was called.
func (s *viewScope) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// bytesAs views b as values of T (nil when b holds none).
func bytesAs[T Scalar](b []byte) []T {
	var zero T
	if len(b) < int(unsafe.Sizeof(zero)) {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(zero)))
}
