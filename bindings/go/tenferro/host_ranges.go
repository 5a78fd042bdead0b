// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"sync"
	"unsafe"
)

// The live HostBuffer blocks and Registration ranges, by address: what a
// failed synchronous copy and HostMemory.Close ask about.

// hostRange is the memory of one live HostBuffer or Registration.  The
// registry points at it, never at the HostBuffer or Registration, so that
// a dropped Registration is still finalized.
type hostRange struct {
	start, end uintptr

	mu    sync.Mutex
	holds []slotHold // failed copies that may still use it (failed_copy.go)
}

// hostRanges are the live ranges (two registrations of one range by two
// runtimes are two): HostAlloc and HostRegister add them, Close removes
// them.
var hostRanges struct {
	sync.Mutex
	live map[*hostRange]struct{}
}

// trackHostRange adds [p, p+n) to the registry.
func trackHostRange(p unsafe.Pointer, n int) *hostRange {
	r := &hostRange{start: uintptr(p), end: uintptr(p) + uintptr(n)}
	hostRanges.Lock()
	if hostRanges.live == nil {
		hostRanges.live = map[*hostRange]struct{}{}
	}
	hostRanges.live[r] = struct{}{}
	hostRanges.Unlock()
	return r
}

// untrack removes r from the registry.
func (r *hostRange) untrack() {
	hostRanges.Lock()
	delete(hostRanges.live, r)
	hostRanges.Unlock()
}

// overlapsHostRange reports whether [start, end) meets a live range.
func overlapsHostRange(start, end uintptr) bool {
	hostRanges.Lock()
	defer hostRanges.Unlock()
	for r := range hostRanges.live {
		if r.start < end && start < r.end {
			return true
		}
	}
	return false
}
