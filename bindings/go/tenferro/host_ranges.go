// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"sync"
	"unsafe"
)

// The live HostBuffer blocks and Registration ranges, by address: what a
// failed synchronous copy and HostMemory.Close ask about.

// hostRange is the memory of one live HostBuffer (which holds it, so the
// registry keeps a HostBuffer reachable: it has no finalizer) or
// Registration (which points at it: the registry must not keep a dropped
// Registration from its finalizer).
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
	r := &hostRange{}
	r.track(p, n)
	return r
}

// track adds r, as [p, p+n), to the registry.
func (r *hostRange) track(p unsafe.Pointer, n int) {
	r.start, r.end = uintptr(p), uintptr(p)+uintptr(n)
	hostRanges.Lock()
	if hostRanges.live == nil {
		hostRanges.live = map[*hostRange]struct{}{}
	}
	hostRanges.live[r] = struct{}{}
	hostRanges.Unlock()
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
