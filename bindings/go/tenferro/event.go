package tenferro

// #include "shim.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// Event is one reference to a CUDA event of a runtime (tf_event), for
// ordering work across stream slots and runtimes: record it on one slot,
// make another slot (WaitEvent) or the host (Synchronize) wait for it.
// Its methods may be called from any goroutine; Close may race with them.
// An Event keeps its runtime alive until its last reference is released;
// a finalizer releases an Event that was never closed.
type Event struct {
	h *handle
}

func newEvent(ptr *C.tf_event) *Event {
	e := &Event{h: newHandle(unsafe.Pointer(ptr), "Event", "tf_event_release",
		dropWith(func(p unsafe.Pointer) *C.tf_error_info { return C.go_tf_event_release((*C.tf_event)(p)) }))}
	runtime.SetFinalizer(e, func(e *Event) { e.h.close() })
	return e
}

func (e *Event) do(op string, call func(*C.tf_event) *C.tf_error_info) error {
	if e == nil {
		return bindingError(StatusInvalidArgument, op, "the Event is nil")
	}
	return e.h.useC(op, func(p unsafe.Pointer) *C.tf_error_info { return call((*C.tf_event)(p)) })
}

// withEvent runs one call with the runtime's and the event's C pointers held.
func (r *Runtime) withEvent(op string, e *Event, call func(*C.tf_runtime, *C.tf_event) *C.tf_error_info) error {
	if e == nil {
		return bindingError(StatusInvalidArgument, op, "the Event is nil")
	}
	return useBoth(op, r.h, e.h, func(p, ev unsafe.Pointer) *C.tf_error_info {
		return call((*C.tf_runtime)(p), (*C.tf_event)(ev))
	})
}

// NewEvent creates an event in the runtime's primary context, timing
// disabled (tf_event_new).  Until its first record, waiting for it returns
// at once.
func (r *Runtime) NewEvent() (*Event, error) {
	var ptr *C.tf_event
	if err := r.do("tf_event_new", func(p *C.tf_runtime) *C.tf_error_info { return C.go_tf_event_new(p, &ptr) }); err != nil {
		return nil, err
	}
	return newEvent(ptr), nil
}

// Clone returns a new reference to the same event (tf_event_retain).
func (e *Event) Clone() (*Event, error) {
	var ptr *C.tf_event
	err := e.do("tf_event_retain", func(p *C.tf_event) *C.tf_error_info {
		ptr = p
		return C.go_tf_event_retain(p)
	})
	if err != nil {
		return nil, err
	}
	return newEvent(ptr), nil
}

// Close releases this reference (tf_event_release); the last one destroys
// the event.  A second Close returns StatusInvalidHandle.
func (e *Event) Close() error {
	runtime.SetFinalizer(e, nil)
	return e.h.close()
}

// RecordEvent records e on the current slot's stream: e completes when the
// work queued there before this call is done (tf_event_record).  r may be
// any runtime on e's device.
func (r *Runtime) RecordEvent(e *Event) error {
	const op = "tf_event_record"
	return r.withEvent(op, e, func(p *C.tf_runtime, ev *C.tf_event) *C.tf_error_info { return C.go_tf_event_record(p, ev) })
}

// WaitEvent makes the current slot's stream wait, on the device, for e's
// latest record (tf_event_wait); the host does not wait.
func (r *Runtime) WaitEvent(e *Event) error {
	const op = "tf_event_wait"
	return r.withEvent(op, e, func(p *C.tf_runtime, ev *C.tf_event) *C.tf_error_info { return C.go_tf_event_wait(p, ev) })
}

// Synchronize blocks until e's latest record is done (tf_event_synchronize).
func (e *Event) Synchronize() error {
	return e.do("tf_event_synchronize", func(p *C.tf_event) *C.tf_error_info { return C.go_tf_event_synchronize(p) })
}

// Done reports, without waiting, whether e's latest record is done (true
// also when it was never recorded; tf_event_query).
func (e *Event) Done() (bool, error) {
	var v C.int32_t
	err := e.do("tf_event_query", func(p *C.tf_event) *C.tf_error_info { return C.go_tf_event_query(p, &v) })
	return v != 0, err
}
