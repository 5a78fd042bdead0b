// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import "sync"

// The slots this package's Captures hold open.  The ...Context waits
// record an event on the slot and query it; inside a capture of the slot
// that record would go into the graph, as a node every launch runs, and
// the query be refused.  They look here first and refuse as the blocking
// calls do.  Only captures begun by Capture and Update are known.
var openCaptures struct {
	sync.Mutex
	slots map[captureSlot]int
}

type captureSlot struct {
	identity uint64
	slot     int
}

// markCapture notes a capture begun on s's slot and returns what unmarks
// it (nothing to unmark when s's identity cannot be read).
func (s *Stream) markCapture() (unmark func()) {
	id, err := s.Identity()
	if err != nil {
		return func() {}
	}
	key := captureSlot{id, s.slot}
	openCaptures.Lock()
	if openCaptures.slots == nil {
		openCaptures.slots = map[captureSlot]int{}
	}
	openCaptures.slots[key]++
	openCaptures.Unlock()
	return func() {
		openCaptures.Lock()
		if openCaptures.slots[key]--; openCaptures.slots[key] == 0 {
			delete(openCaptures.slots, key)
		}
		openCaptures.Unlock()
	}
}

// refuseWhileCapturing is op's StatusRuntimeState error when r's current
// slot captures a graph this package began, else nil.  It costs nothing
// while no capture is open.
func (r *Runtime) refuseWhileCapturing(op string) error {
	openCaptures.Lock()
	none := len(openCaptures.slots) == 0
	openCaptures.Unlock()
	if none {
		return nil
	}
	id, err := r.Identity()
	if err != nil {
		return err
	}
	slot, err := r.CurrentSlot()
	if err != nil {
		return err
	}
	openCaptures.Lock()
	n := openCaptures.slots[captureSlot{id, slot}]
	openCaptures.Unlock()
	if n == 0 {
		return nil
	}
	return bindingError(StatusRuntimeState, op,
		"slot %d is capturing a graph (begun by Stream.Capture); this call waits for the device; end the capture first", slot)
}
