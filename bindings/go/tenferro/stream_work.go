// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"fmt"
	"os"
	"unsafe"
)

// SlotWait makes the current slot's stream wait, on the device, for the
// work queued on slot otherSlot's stream before this call (tf_slot_wait);
// the host does not wait.  It takes no slot lock, so it may be called from
// StreamEnqueue and CublasEnqueue callbacks.
func (r *Runtime) SlotWait(otherSlot int) error {
	const op = "tf_slot_wait"
	s, err := int32Arg(op, "other_slot", otherSlot)
	if err != nil {
		return err
	}
	return r.do(op, func(p unsafe.Pointer) error { return slotWait(p, s) })
}

// Retire runs release once the device has finished the work queued on the
// current slot's stream before this call, without making the host wait
// (tf_workspace_retire): typically to free a workspace that queued work
// still uses.  release runs on the goroutine of a later Retire,
// PollRetirements or Sync (on any slot), or at the runtime's teardown,
// with the primary context current; it may call this package, but not the
// runtime being torn down when it runs from the last Close.  A panic in
// release is printed to stderr and contained.
//
// On nil, release has run (a full queue waits for the stream instead) or
// will run exactly once.  On an error it never runs: with StatusInvalidArgument
// or StatusInvalidHandle the resource is still yours; with any other
// status the device may still use it, so leak it.
func (r *Runtime) Retire(release func()) error {
	const op = "tf_workspace_retire"
	if release == nil {
		return bindingError(StatusInvalidArgument, op, "release is nil")
	}
	return r.do(op, func(p unsafe.Pointer) error { return workspaceRetire(p, release) })
}

// runRelease runs a Retire release function for the library.
func runRelease(release func()) {
	defer func() {
		// A panic must not unwind through the library's C frames.
		if v := recover(); v != nil {
			fmt.Fprintf(os.Stderr, "tenferro: a Retire release function panicked: %v\n", v)
		}
	}()
	release()
}

// PollRetirements runs the releases of every retirement the device has
// passed, on all slots, without waiting (tf_workspace_poll).
func (r *Runtime) PollRetirements() error {
	return r.do("tf_workspace_poll", workspacePoll)
}

// RetirementStats are a runtime's retirement counters (tf_retirement_stats).
// Every accepted retirement (queued: Deferred; never queued, once its stream
// wait returned: BarrierFallbacks) is in exactly one of Released, Leaked and
// InFlight: Deferred+BarrierFallbacks == Released+Leaked+InFlight in every
// snapshot.
type RetirementStats struct {
	Capacity         int    // the queue bound (Options.RetirementCapacity)
	Deferred         uint64 // retirements queued behind an event
	Released         uint64 // releases started (or found and about to start)
	BarrierFallbacks uint64 // retirements never queued, resolved by waiting for their stream instead
	Leaked           uint64 // resources never released: the device's progress was unprovable, or the finding thread ended first
	InFlight         uint64 // queued retirements neither released nor leaked yet
	MaxInFlight      uint64 // the most ever in flight at once
}

// RetirementStats returns a consistent snapshot of the counters
// (tf_workspace_stats).
func (r *Runtime) RetirementStats() (s RetirementStats, err error) {
	err = r.do("tf_workspace_stats", func(p unsafe.Pointer) error {
		s, err = workspaceStats(p)
		return err
	})
	return s, err
}
