// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import "unsafe"

// HostMemory is anonymous memory mapped for the program (mmap), which the
// Go runtime neither manages nor moves: memory HostRegister may take when
// no C library provides it.  Page-aligned, zeroed.  Its methods may be
// called from any goroutine, concurrently.
//
// Read and write it inside With; UnsafeBytes is the raw view, valid until
// Close and unchecked.  Close unmaps it, and refuses while any runtime has
// part of it registered, so a Registration can never outlive its memory.
// A HostMemory dropped without Close stays mapped until the process exits.
type HostMemory struct {
	mem   []byte // the mapping, as the system call returned it
	scope viewScope
}

// MapHostMemory maps bytes (at least 1) of anonymous memory, rounded up to
// whole pages by the system.  On systems without mmap it returns an error
// with StatusNotSupported.
func MapHostMemory(bytes int) (*HostMemory, error) {
	const op = "mmap"
	if bytes <= 0 {
		return nil, bindingError(StatusInvalidArgument, op, "bytes %d is not positive", bytes)
	}
	mem, err := mapAnonymous(op, bytes)
	if err != nil {
		return nil, err
	}
	return &HostMemory{mem: mem}, nil
}

// open: made by MapHostMemory and not closed.
func (m *HostMemory) open() bool { return m != nil && m.mem != nil && !m.scope.isClosed() }

// Ptr is the mapping's address (nil once closed).
func (m *HostMemory) Ptr() unsafe.Pointer {
	if !m.open() {
		return nil
	}
	return unsafe.Pointer(&m.mem[0])
}

// Len is the number of bytes asked for (0 once closed).
func (m *HostMemory) Len() int {
	if !m.open() {
		return 0
	}
	return len(m.mem)
}

// With runs fn with the memory as a slice, which stays valid until fn
// returns and must not be kept after it: a Close made meanwhile is carried
// out when the last With returns.  Once the HostMemory is closed it
// returns an error with StatusInvalidHandle and does not run fn.
func (m *HostMemory) With(fn func(b []byte)) error {
	if m == nil || m.mem == nil {
		return errNotOpen("HostMemory.With")
	}
	return m.scope.lend("HostMemory.With", "HostMemory", unsafe.Pointer(&m.mem[0]), len(m.mem), fn, m.unmap)
}

// UnsafeBytes is the memory as a slice (nil once closed), valid until
// Close and unchecked: used after it, it faults.  Prefer With.
func (m *HostMemory) UnsafeBytes() []byte {
	if !m.open() {
		return nil
	}
	return m.mem
}

// Close unmaps the memory; a second Close does nothing.  While any
// runtime has part of it registered it returns an error with
// StatusInvalidArgument and leaves it mapped and open: close the
// Registration first.  While a With runs it returns nil, and the last
// With unmaps.
func (m *HostMemory) Close() error {
	if m == nil || m.mem == nil {
		return nil
	}
	if err := m.refuseRegistered(); err != nil {
		return err
	}
	if !m.scope.close() {
		return nil
	}
	return m.unmap()
}

func (m *HostMemory) refuseRegistered() error {
	start := uintptr(unsafe.Pointer(&m.mem[0]))
	if overlapsHostRange(start, start+uintptr(len(m.mem))) {
		return bindingError(StatusInvalidArgument, "munmap",
			"the HostMemory at %p is registered with a runtime (HostRegister): close the Registration first", &m.mem[0])
	}
	return nil
}

// unmap gives the memory back to the system, unless a Registration took
// it while a With ran (then it stays mapped for good).
func (m *HostMemory) unmap() error {
	if err := m.refuseRegistered(); err != nil {
		return err
	}
	return unmapAnonymous("munmap", m.mem)
}
