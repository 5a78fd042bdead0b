// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// The ...Context variants of the calls that block until device work is done
// (Sync, Download, DownloadScalar, Event.Synchronize) stop waiting when
// their context is done.  Device work cannot be cancelled: they leave it
// running and return a *PendingWorkError that says so.  They wait by
// recording an event after the work and querying it (tf_event_query) with
// a backoff; a context that can never be done (context.Background()) takes
// the blocking call instead.

// PendingWorkError is what a ...Context call returns when its context is
// done before the device work it waits for.  The work was NOT cancelled: it
// is still queued or running on the device, and still reads and writes its
// buffers.  Until Event reports it done, do not free, reuse or overwrite the
// device memory that work uses (a Buffer's Free, an Upload into it, a
// Retire that frees it), nor read what it writes.  Observe completion with
// Event.Done (without waiting), Event.Synchronize or SynchronizeContext,
// or Sync on the same Stream; order other streams after it on the device
// with WaitEvent(Event).
//
// errors.Is(err, context.Canceled) and errors.Is(err,
// context.DeadlineExceeded) see the context's error through it.
type PendingWorkError struct {
	Op  string // the wait that stopped: "tf_runtime_sync", "tf_download", "tf_download_scalar" or "tf_event_synchronize"
	Err error  // the context's error

	// Event completes once the device has done the work the call waited
	// for.  For SynchronizeContext it is the Event waited for; otherwise it
	// is an Event of its own, recorded on the slot after that work, which
	// the error owns: Close it when done with it (or leave it to the
	// garbage collector).
	Event *Event

	detail string // what became of the call's own memory
}

func (e *PendingWorkError) Error() string {
	return fmt.Sprintf("%s: stopped waiting: %v; the device work was NOT cancelled and may still be running: "+
		"do not free, reuse or overwrite the device memory it uses, nor read what it writes, "+
		"until its Event (PendingWorkError.Event) is done: Done, Synchronize, SynchronizeContext, or Sync on the same Stream%s",
		e.Op, e.Err, e.detail)
}

// Unwrap returns the context's error.
func (e *PendingWorkError) Unwrap() error { return e.Err }

// Backoff between two queries: first only yield, since the device often
// finishes within microseconds, then sleep, twice as long each time up to
// maxPollSleep (the most a completion goes unnoticed once waits are long).
const (
	pollSpins      = 16
	firstPollSleep = 10 * time.Microsecond
	maxPollSleep   = time.Millisecond
)

type poller struct {
	spins int
	sleep time.Duration
	timer *time.Timer
}

// wait returns false at once when ctx is done, else after the next pause.
func (p *poller) wait(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if p.spins < pollSpins {
		p.spins++
		runtime.Gosched()
		return true
	}
	switch {
	case p.sleep == 0:
		p.sleep = firstPollSleep
	case p.sleep < maxPollSleep:
		p.sleep = minDuration(2*p.sleep, maxPollSleep)
	}
	if p.timer == nil {
		p.timer = time.NewTimer(p.sleep)
	} else {
		p.timer.Reset(p.sleep)
	}
	select {
	case <-ctx.Done():
		p.timer.Stop()
		return false
	case <-p.timer.C:
		return true
	}
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// await queries e until it is done (nil), the query fails (its error) or
// ctx is done (stopped).
func (e *Event) await(ctx context.Context) (stopped bool, err error) {
	var p poller
	for {
		done, err := e.Done()
		if err != nil || done {
			return false, err
		}
		if !p.wait(ctx) {
			return true, nil
		}
	}
}

// SynchronizeContext is Synchronize that stops waiting when ctx is done,
// returning a *PendingWorkError whose Event is e.
func (e *Event) SynchronizeContext(ctx context.Context) error {
	if ctx.Done() == nil {
		return e.Synchronize()
	}
	stopped, err := e.await(ctx)
	if stopped {
		return &PendingWorkError{Op: "tf_event_synchronize", Err: ctx.Err(), Event: e}
	}
	return err
}

// awaitQueued waits, until ctx is done, for the work queued so far on r's
// current slot: an event recorded there completes after it.
func (r *Runtime) awaitQueued(ctx context.Context, op, detail string) error {
	if err := r.refuseWhileCapturing(op); err != nil {
		return err
	}
	e, err := r.NewEvent()
	if err != nil {
		return err
	}
	if err := r.RecordEvent(e); err != nil {
		e.Close()
		return err
	}
	stopped, err := e.await(ctx)
	if stopped {
		return &PendingWorkError{Op: op, Err: ctx.Err(), Event: e, detail: detail}
	}
	e.Close()
	return err
}

// SyncContext is Sync that stops waiting when ctx is done: it waits for
// the work queued on the current slot's stream (on a Stream, its slot)
// before the call, then runs the workspace retirements the device has
// passed (PollRetirements).  When ctx is done first it returns a
// *PendingWorkError, and the work goes on.  Its errors come from the calls
// it makes: tf_event_new, tf_event_record, tf_event_query (a device fault
// shows there), tf_workspace_poll; StatusRuntimeState while a Capture of
// the slot is open, before it records anything into it.
func (r *Runtime) SyncContext(ctx context.Context) error {
	if ctx.Done() == nil {
		return r.Sync()
	}
	if err := r.awaitQueued(ctx, "tf_runtime_sync", ""); err != nil {
		return err
	}
	return r.PollRetirements()
}

const downloadDetail = "; the destination was not written, and the library will not write it"

// DownloadContext is Download that stops waiting for the work queued on
// q's slot when ctx is done, returning a *PendingWorkError before anything
// is copied (dst is untouched).  Once that work is done it downloads as
// Download does; the copy itself is not interrupted.
func DownloadContext[T Scalar](ctx context.Context, q Queue, dst []T, src DevicePtr) error {
	if ctx.Done() != nil {
		if err := runtimeOf(q).awaitQueued(ctx, "tf_download", downloadDetail); err != nil {
			return err
		}
	}
	return Download(q, dst, src)
}

// DownloadScalarContext is DownloadScalar that stops waiting for the work
// queued on q's slot when ctx is done, returning a *PendingWorkError.
func DownloadScalarContext[T Scalar](ctx context.Context, q Queue, src DevicePtr) (T, error) {
	if ctx.Done() != nil {
		if err := runtimeOf(q).awaitQueued(ctx, "tf_download_scalar", downloadDetail); err != nil {
			var zero T
			return zero, err
		}
	}
	return DownloadScalar[T](q, src)
}

// DownloadContext is Download (of the buffer) with DownloadContext's
// handling of ctx.
func (b *Buffer[T]) DownloadContext(ctx context.Context, dst []T) error {
	if err := b.checkDownload(dst); err != nil {
		return err
	}
	return DownloadContext(ctx, b.rt, dst, b.ptr)
}
