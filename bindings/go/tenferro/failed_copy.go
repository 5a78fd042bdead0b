// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import "unsafe"

// What a failed synchronous copy leaves behind.
//
// tf_download and tf_upload copy straight to or from page-locked memory,
// then wait for the stream.  When that wait fails the copy may still be
// queued, and the header says: keep the host memory until a later
// tf_runtime_sync of the slot succeeds, or leak it.  So, in the failing
// cgo call itself (the slot is the failing thread's), the shim tells the
// runtime's pool that the slot's stream uses the memory
// (tf_host_record_use): tf_host_free then parks the block until that
// stream has passed the copy, and tf_host_unregister waits for it.
//
// When the pool cannot be told (the runtime saw a device fault; the memory
// is another runtime's block or range), the HostBuffer or Registration the
// memory lies in gets a hold: a reference bound to the failed call's slot.
// Its Free or Unregister first synchronizes that slot, the wait the pool
// would have made; if the wait fails, Free leaks the block and Unregister
// keeps the range registered.

// failedCopy is what the shim did after a failed tf_download or tf_upload.
type failedCopy struct {
	recorded Status // tf_host_record_use's status; StatusInvalidArgument when nothing was queued
	slot     int    // the failed call's slot, -1 if unknown
}

// slotHold is a stream that may still use a hostRange: rt is bound to its
// slot, or nil when no reference could be made (err says why).
type slotHold struct {
	op   string // the call that failed
	slot int
	rt   *Runtime
	err  error
}

// hostRangeHolding is the live range that holds address p, or nil.  It
// scans: only a failed copy asks.
func hostRangeHolding(p uintptr) *hostRange {
	hostRanges.Lock()
	defer hostRanges.Unlock()
	for r := range hostRanges.live {
		if r.start <= p && p < r.end {
			return r
		}
	}
	return nil
}

// afterCopy returns the error of a synchronous copy between the device and
// host memory at p through the runtime at rt, first giving the range p
// lies in a hold when the shim could not tell the pool.
func afterCopy(rt unsafe.Pointer, op string, f failedCopy, p unsafe.Pointer, err error) error {
	if err == nil || f.recorded == StatusOK || p == nil {
		return err
	}
	if e, ok := err.(*Error); ok && e.Status == StatusInvalidArgument {
		return err // nothing was queued
	}
	r := hostRangeHolding(uintptr(p))
	if r == nil {
		return err // Go or C memory: the library never touches it after the call
	}
	h := slotHold{op: op, slot: f.slot}
	if f.slot < 0 {
		h.err = bindingError(StatusInternal, op, "the slot of the failed call is unknown")
	} else if bound, berr := runtimeBindSlot(rt, int32(f.slot)); berr != nil {
		h.err = berr
	} else {
		h.rt = newRuntime(bound)
	}
	r.mu.Lock()
	r.holds = append(r.holds, h)
	r.mu.Unlock()
	return err
}

// settle waits for every stream that holds r (Sync of its slot) and drops
// the holds that waited.  It returns the first whose wait failed (it
// stays) and why, or a nil error.
func (r *hostRange) settle() (failed slotHold, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.holds[:0]
	for _, h := range r.holds {
		werr := h.err
		if h.rt != nil {
			werr = h.rt.Sync()
		}
		if werr == nil {
			h.rt.Close()
			continue
		}
		if err == nil {
			failed, err = h, werr
		}
		kept = append(kept, h)
	}
	r.holds = kept
	return failed, err
}

// drop releases the holds' references: the memory is leaked for good.
func (r *hostRange) drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.holds {
		if h.rt != nil {
			h.rt.Close()
		}
	}
	r.holds = nil
}

// heldError is op's error for memory that h's stream may still use:
// outcome says what became of the memory, cause why waiting for h failed
// (whose status it takes).
func heldError(op, outcome string, h slotHold, cause error) *Error {
	e := bindingError(StatusRuntimeState, op, "%s: the %s that failed on slot %d may still use it, "+
		"and waiting for that slot failed: %v", outcome, h.op, h.slot, cause)
	if c, ok := cause.(*Error); ok {
		e.Status, e.Domain, e.Code, e.Call = c.Status, c.Domain, c.Code, c.Call
	}
	return e
}
