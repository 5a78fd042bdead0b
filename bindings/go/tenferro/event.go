// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"context"
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

func newEvent(ptr unsafe.Pointer) *Event {
	e := &Event{h: newHandle(ptr, "Event", "tf_event_release", eventRelease)}
	runtime.SetFinalizer(e, func(e *Event) { e.h.close() })
	return e
}

func (e *Event) do(op string, call func(event unsafe.Pointer) error) error {
	if e == nil {
		return bindingError(StatusInvalidArgument, op, "the Event is nil")
	}
	return e.h.use(op, call)
}

// withEvent runs one call with the runtime's and the event's C pointers held.
func (r *Runtime) withEvent(op string, e *Event, call func(rt, event unsafe.Pointer) error) error {
	if e == nil {
		return bindingError(StatusInvalidArgument, op, "the Event is nil")
	}
	return useBoth(op, r.handle(), e.h, call)
}

// NewEvent creates an event in the runtime's primary context, timing
// disabled (tf_event_new).  Until its first record, waiting for it returns
// at once.
func (r *Runtime) NewEvent() (*Event, error) {
	var ptr unsafe.Pointer
	err := r.do("tf_event_new", func(p unsafe.Pointer) (err error) {
		ptr, err = eventNew(p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return newEvent(ptr), nil
}

// Clone returns a new reference to the same event (tf_event_retain).
func (e *Event) Clone() (*Event, error) {
	var ptr unsafe.Pointer
	err := e.do("tf_event_retain", func(p unsafe.Pointer) error {
		ptr = p
		return eventRetain(p)
	})
	if err != nil {
		return nil, err
	}
	return newEvent(ptr), nil
}

// Close releases this reference (tf_event_release); the last one destroys
// the event.  A second Close returns StatusInvalidHandle.
func (e *Event) Close() error {
	if e == nil {
		return errNotOpen("tf_event_release")
	}
	runtime.SetFinalizer(e, nil)
	return e.h.close()
}

// RecordEvent records e on the current slot's stream: e completes when the
// work queued there before this call is done (tf_event_record).  r may be
// any runtime on e's device.
func (r *Runtime) RecordEvent(e *Event) error {
	return r.withEvent("tf_event_record", e, eventRecord)
}

// WaitEvent makes the current slot's stream wait, on the device, for e's
// latest record (tf_event_wait); the host does not wait.
func (r *Runtime) WaitEvent(e *Event) error {
	return r.withEvent("tf_event_wait", e, eventWait)
}

// Synchronize blocks until e's latest record is done (tf_event_synchronize).
// SynchronizeContext stops waiting when a context is done.
func (e *Event) Synchronize() error {
	return e.do("tf_event_synchronize", eventSynchronize)
}

// Done reports, without waiting, whether e's latest record is done (true
// also when it was never recorded; tf_event_query).
func (e *Event) Done() (done bool, err error) {
	err = e.do("tf_event_query", func(p unsafe.Pointer) error {
		done, err = eventQuery(p)
		return err
	})
	return done, err
}

// Wait is Synchronize, named for what an asynchronous copy's Event is
// waited for (DownloadAsync, UploadAsync): it blocks until the copy is done.
func (e *Event) Wait() error { return e.Synchronize() }

// WaitContext is SynchronizeContext: Wait that stops waiting when ctx is
// done, returning a *PendingWorkError (the copy goes on).
func (e *Event) WaitContext(ctx context.Context) error { return e.SynchronizeContext(ctx) }
