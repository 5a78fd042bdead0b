// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// How late a ...Context call may return after its context is done: it
// wakes on ctx.Done() at once; the rest is a loaded test machine.
const promptly = 200 * time.Millisecond

// How early a deadline may fire: the timer and time.Now read the same
// monotonic clock, so by no more than that clock's resolution.
const clockGranularity = time.Millisecond

// holdBack keeps the work queued on s so far from completing until the
// returned release is called.  Against the double, deferred execution does
// that by itself as long as nothing synchronizes s (holdBack checks that
// work is queued); on a GPU it queues a gate, a host function that waits
// for release, so that what is queued after it stays pending.  The test's
// end releases it, before the runtime's Close.
func holdBack(t *testing.T, s *tenferro.Stream) (release func()) {
	t.Helper()
	if double != nil {
		h, err := s.Handle()
		must(t, err)
		if double.Pending(h) == 0 {
			t.Fatal("nothing is queued on the stream: there is no work to wait for")
		}
		return func() {}
	}
	gate := testsupport.NewGate()
	t.Cleanup(gate.Open)
	must(t, s.StreamEnqueue(func(stream unsafe.Pointer) error {
		if r := gate.Enqueue(stream); r != 0 {
			return fmt.Errorf("cuLaunchHostFunc: CUresult %d", r)
		}
		return nil
	}))
	return gate.Open
}

// stillPending checks that the device work behind a *PendingWorkError
// goes on: its event is not done, and against the double the stream's ops
// are still queued (neither run nor dropped).
func stillPending(t *testing.T, s *tenferro.Stream, err error, op string, cause error) *tenferro.PendingWorkError {
	t.Helper()
	var pe *tenferro.PendingWorkError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *PendingWorkError, got %T %v", err, err)
	}
	if pe.Event != nil {
		// Closed once the test ends, failed or not (a second Close is
		// harmless), before the runtime's Close.
		t.Cleanup(func() { pe.Event.Close() })
	}
	if pe.Op != op || !errors.Is(err, cause) || pe.Event == nil {
		t.Fatalf("PendingWorkError{Op: %q, Err: %v, Event: %v}, want op %q and %v", pe.Op, pe.Err, pe.Event, op, cause)
	}
	for _, f := range []string{op + ": stopped waiting: " + cause.Error(), "NOT cancelled", "do not free, reuse or overwrite"} {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q lacks %q", err, f)
		}
	}
	if done, err := pe.Event.Done(); err != nil || done {
		t.Fatalf("the work's event: done %v, %v; want pending", done, err)
	}
	if double != nil {
		h, err := s.Handle()
		must(t, err)
		if double.Pending(h) == 0 {
			t.Fatal("the stream's work is no longer queued: the call ran or dropped it")
		}
	}
	return pe
}

// deviceMovesOn makes the double run stream work without a synchronizing
// call, as a GPU does: each event query first runs an op of its stream.
// (By default the double runs work only when something waits for it, so
// an event recorded after it is never seen done by queries alone.)
func deviceMovesOn() {
	if double != nil {
		double.SetQueryProgress(1)
	}
}

// cancelAfter returns a context cancelled d from now, and a function that
// says how long after the cancellation it is.
func cancelAfter(d time.Duration) (context.Context, func() time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	at := make(chan time.Time, 1)
	go func() {
		time.Sleep(d)
		at <- time.Now()
		cancel()
	}()
	return ctx, func() time.Duration { return time.Since(<-at) }
}

// uploaded makes a runtime with a Stream on slot and a Buffer on it
// holding values, the upload still queued; all are released when the test
// ends.
func uploaded(t *testing.T, slot int, values []uint32) (*tenferro.Stream, *tenferro.Buffer[uint32]) {
	t.Helper()
	rt := newRuntime(t, 2)
	t.Cleanup(func() { closeRuntime(t, rt) })
	s := bind(t, rt, slot)
	buf, err := tenferro.NewBuffer[uint32](s, len(values))
	must(t, err)
	t.Cleanup(func() { buf.Free() })
	must(t, s.Sync())
	must(t, buf.Upload(values))
	return s, buf
}

// A SyncContext whose context is cancelled while the work is pending
// returns promptly with a *PendingWorkError; the work is not cancelled and
// completes later, observed through the error's Event.
func TestSyncContextCancelledWhileWorkIsPending(t *testing.T) {
	want := sequence(1000, 3)
	s, buf := uploaded(t, 1, want)
	release := holdBack(t, s)

	ctx, sinceCancel := cancelAfter(20 * time.Millisecond)
	err := s.SyncContext(ctx)
	late := sinceCancel()
	pe := stillPending(t, s, err, "tf_runtime_sync", context.Canceled)
	if late > promptly {
		t.Fatalf("SyncContext returned %v after the cancellation", late)
	}
	defer pe.Event.Close()

	release()
	must(t, pe.Event.Synchronize())
	if done, err := pe.Event.Done(); err != nil || !done {
		t.Fatalf("after Synchronize the event is done %v, %v", done, err)
	}
	got := make([]uint32, len(want))
	must(t, buf.Download(got))
	if !sameValues(got, want) {
		t.Fatalf("the work went on, but the buffer holds %v...", got[:4])
	}
}

// A deadline that passes while the work is pending: DeadlineExceeded, not
// before the deadline and promptly after it.  The deadline is the
// context's own (its monotonic reading), not a time taken after it was set,
// which would make the wait look up to that gap shorter.
func TestSyncContextDeadline(t *testing.T) {
	s, _ := uploaded(t, 0, sequence(100, 1))
	release := holdBack(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	err := s.SyncContext(ctx)
	returned := time.Now()
	pe := stillPending(t, s, err, "tf_runtime_sync", context.DeadlineExceeded)
	if early := deadline.Sub(returned); early > clockGranularity {
		t.Fatalf("SyncContext returned %v before its deadline", early)
	}
	if late := returned.Sub(deadline); late > promptly {
		t.Fatalf("SyncContext returned %v after its deadline", late)
	}
	pe.Event.Close()
	release()
	must(t, s.Sync())
}

// A context that is never cancelled: SyncContext waits, by querying, for
// the device to finish (against the double a background thread of its own
// runs the work a few milliseconds later, as a GPU would), then runs the
// retirements the device passed.
func TestSyncContextCompletesWhenNotCancelled(t *testing.T) {
	want := sequence(1000, 9)
	s, buf := uploaded(t, 1, want)
	released := false
	must(t, s.Retire(func() { released = true }))
	release := holdBack(t, s)
	if double != nil {
		double.SetBackgroundDelay(5000)
		double.SetExecution(testsupport.ExecBackground)
	} else {
		time.AfterFunc(10*time.Millisecond, release)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must(t, s.SyncContext(ctx))
	if !released {
		t.Fatal("SyncContext did not run the retirement the device passed")
	}
	if double != nil {
		if n := double.Calls("cuEventQuery"); n < 2 {
			t.Fatalf("%d event queries: SyncContext did not poll", n)
		}
		if n := double.Calls("cuStreamSynchronize"); n != 1 {
			t.Fatalf("cuStreamSynchronize called %d times: want only uploaded's Sync, not a blocking wait", n)
		}
	}
	got, err := tenferro.DownloadScalarContext[uint32](ctx, s, buf.Ptr().Add(4*999))
	if err != nil || got != want[999] {
		t.Fatalf("DownloadScalarContext = %d, %v; want %d", got, err, want[999])
	}
}

// DownloadContext stops before copying anything: the destination keeps
// its contents, the upload it waited for completes later, and a new
// DownloadContext then reads it.
func TestDownloadContextCancelledWhileWorkIsPending(t *testing.T) {
	want := sequence(20000, 5) // staged: more than 64 KiB
	s, buf := uploaded(t, 1, want)
	release := holdBack(t, s)

	dst := make([]uint32, len(want))
	for i := range dst {
		dst[i] = 0xdeadbeef
	}
	ctx, sinceCancel := cancelAfter(20 * time.Millisecond)
	err := buf.DownloadContext(ctx, dst)
	late := sinceCancel()
	pe := stillPending(t, s, err, "tf_download", context.Canceled)
	if late > promptly {
		t.Fatalf("DownloadContext returned %v after the cancellation", late)
	}
	if !strings.Contains(err.Error(), "the destination was not written") {
		t.Fatalf("error %q does not say what became of dst", err)
	}
	for i, v := range dst {
		if v != 0xdeadbeef {
			t.Fatalf("dst[%d] = %d: written although the call stopped waiting", i, v)
		}
	}
	release()
	must(t, pe.Event.SynchronizeContext(context.Background()))
	pe.Event.Close()
	ctx2, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deviceMovesOn()
	must(t, tenferro.DownloadContext(ctx2, s, dst, buf.Ptr()))
	if !sameValues(dst, want) {
		t.Fatalf("downloaded %v...", dst[:4])
	}
}

func TestDownloadScalarContextDeadline(t *testing.T) {
	s, buf := uploaded(t, 0, []uint32{42})
	release := holdBack(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	v, err := tenferro.DownloadScalarContext[uint32](ctx, s, buf.Ptr())
	pe := stillPending(t, s, err, "tf_download_scalar", context.DeadlineExceeded)
	if v != 0 {
		t.Fatalf("a value %d came back with the error", v)
	}
	pe.Event.Close()
	release()
	if v, err := tenferro.DownloadScalar[uint32](s, buf.Ptr()); err != nil || v != 42 {
		t.Fatalf("DownloadScalar = %d, %v", v, err)
	}
}

// Event.SynchronizeContext: the error's Event is the one waited for; a
// later wait without a deadline sees it complete.
func TestEventSynchronizeContext(t *testing.T) {
	s, _ := uploaded(t, 1, sequence(100, 2))
	release := holdBack(t, s)
	ev, err := s.NewEvent()
	must(t, err)
	defer ev.Close()
	must(t, s.RecordEvent(ev))
	ctx, sinceCancel := cancelAfter(10 * time.Millisecond)
	err = ev.SynchronizeContext(ctx)
	late := sinceCancel()
	if pe := stillPending(t, s, err, "tf_event_synchronize", context.Canceled); pe.Event != ev {
		t.Fatalf("the error's Event %p is not the one waited for %p", pe.Event, ev)
	}
	if late > promptly {
		t.Fatalf("SynchronizeContext returned %v after the cancellation", late)
	}
	release()
	ctx2, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deviceMovesOn()
	must(t, ev.SynchronizeContext(ctx2))
	if done, err := ev.Done(); err != nil || !done {
		t.Fatalf("Done after SynchronizeContext: %v, %v", done, err)
	}
}

// A context that can never be done takes the blocking calls: nothing is
// polled (no event is made), and they wait as Sync and Download do.
func TestContextVariantsWithABackgroundContext(t *testing.T) {
	want := sequence(300, 4)
	s, buf := uploaded(t, 1, want)
	ctx := context.Background()
	got := make([]uint32, len(want))
	must(t, buf.DownloadContext(ctx, got))
	must(t, s.SyncContext(ctx))
	if v, err := tenferro.DownloadScalarContext[uint32](ctx, s, buf.Ptr()); err != nil || v != want[0] {
		t.Fatalf("DownloadScalarContext = %d, %v", v, err)
	}
	if !sameValues(got, want) {
		t.Fatalf("downloaded %v...", got[:4])
	}
	if double != nil && double.Calls("cuEventRecord") != 0 {
		t.Fatal("a Background context recorded an event: it should take the blocking call")
	}
	// A Buffer checks its length before waiting.
	err := buf.DownloadContext(ctx, make([]uint32, 301))
	asError(t, err, tenferro.StatusInvalidArgument, "tf_download", "more than the buffer's 300")
}
