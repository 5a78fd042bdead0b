// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(level tenferro.LogLevel, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, message)
}

func (l *logLines) joined() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// A teardown whose stream sync fails leaks on purpose and says so in the
// log, which reaches the Go callback.
func TestLogCallbackGetsTeardownWarnings(t *testing.T) {
	d := requireDouble(t)
	var got logLines
	if err := tenferro.SetLogCallback(got.add); err != nil {
		t.Fatal(err)
	}
	defer tenferro.SetLogCallback(nil)
	rt := newRuntime(t, 2)
	if _, err := rt.SlotStream(1); err != nil {
		t.Fatal(err)
	}
	d.Fail("cuStreamSynchronize", 1, testsupport.CudaErrorLaunchTimeout, 1)
	if err := rt.Close(); err != nil {
		t.Fatalf("teardown failures go to the log, not to Close: %v", err)
	}
	log := got.joined()
	for _, want := range []string{"cuStreamSynchronize of slot 1 failed", "CUDA_ERROR_LAUNCH_TIMEOUT (702)", "leaking"} {
		if !strings.Contains(log, want) {
			t.Fatalf("log %q lacks %q", log, want)
		}
	}
}

// SetLogCallback from inside the callback is refused by the library (it
// would deadlock), not by waiting on the binding's own lock.
func TestSetLogCallbackInsideTheCallbackIsRefused(t *testing.T) {
	d := requireDouble(t)
	var inner error
	called := false
	if err := tenferro.SetLogCallback(func(tenferro.LogLevel, string) {
		if !called {
			called = true
			inner = tenferro.SetLogCallback(nil)
		}
	}); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, 1)
	if _, err := rt.Stream(); err != nil {
		t.Fatal(err)
	}
	d.Fail("cuStreamSynchronize", 1, testsupport.CudaErrorLaunchTimeout, 1)
	rt.Close()
	if err := tenferro.SetLogCallback(nil); err != nil {
		t.Fatal(err)
	}
	if !called {
		t.Fatal("the callback was not called")
	}
	asError(t, inner, tenferro.StatusRuntimeState, "tf_set_log_callback")
}

// A panicking log callback does not crash the process or unwind through C.
func TestPanickingLogCallbackIsContained(t *testing.T) {
	d := requireDouble(t)
	if err := tenferro.SetLogCallback(func(tenferro.LogLevel, string) { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	defer tenferro.SetLogCallback(nil)
	rt := newRuntime(t, 1)
	if _, err := rt.Stream(); err != nil {
		t.Fatal(err)
	}
	d.Fail("cuStreamSynchronize", 1, testsupport.CudaErrorLaunchTimeout, 1)
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
}
