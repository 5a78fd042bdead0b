// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import "unsafe"

// Stream is one stream slot of a runtime, held through a reference bound to
// it (tf_runtime_bind_slot).  Every call made through a Stream uses its
// slot, from whatever OS thread the goroutine runs on at the time, so the
// uploads, kernels, GEMMs, downloads and Sync of one Stream are ordered on
// one CUDA stream even though Go moves goroutines between OS threads.  It is
// the way to use this package from goroutines: give each goroutine (or each
// independent sequence of work) its own Stream.
//
// A Stream embeds the bound *Runtime, so every Runtime method is available
// on it and uses its slot; pass it wherever a Queue is taken (Upload,
// Download, NewBuffer, ...).  Streams on the same slot share one CUDA
// stream.  Its methods may be called from any goroutine; Close releases the
// reference (the runtime lives on while other references remain), and a
// finalizer releases a Stream that was never closed.  Make Streams with
// NewStream: a Stream built by hand is not bound to its slot.
type Stream struct {
	*Runtime // the bound reference
	slot     int
}

// NewStream returns a Stream on slot `slot` (0 .. SlotCount-1) of r's
// runtime, a new reference bound to that slot (tf_runtime_bind_slot).  It
// creates no CUDA stream: the slot's stream is made at its first use and
// lives as long as the runtime.  NewStream on a Stream gives a Stream on
// another slot of the same runtime.
func (r *Runtime) NewStream(slot int) (*Stream, error) {
	bound, err := r.BindSlot(slot)
	if err != nil {
		return nil, err
	}
	return &Stream{Runtime: bound, slot: slot}, nil
}

// Slot is the stream slot the Stream uses.
func (s *Stream) Slot() int { return s.slot }

// Handle returns the slot's CUstream (created on first use), for work of
// other libraries that must be ordered with the Stream's; prefer
// StreamEnqueue, which also makes the primary context current.
func (s *Stream) Handle() (unsafe.Pointer, error) { return s.Runtime.Stream() }

// Queue is what the transfer functions take: a *Stream, whose slot orders
// the transfer, or a *Runtime (its current slot: that of the calling OS
// thread unless it came from BindSlot).
type Queue interface {
	queueRuntime() *Runtime
}

func (r *Runtime) queueRuntime() *Runtime { return r }

// runtimeOf is q's Runtime; a nil Queue or nil *Stream gives a nil Runtime,
// whose calls fail with StatusInvalidHandle.
func runtimeOf(q Queue) *Runtime {
	switch v := q.(type) {
	case nil:
		return nil
	case *Stream:
		if v == nil {
			return nil
		}
		return v.Runtime
	default:
		return q.queueRuntime()
	}
}
