// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// double is the driver double's control interface, nil against the real
// driver (set by TestMain).
var double *testsupport.Double

// TestMain says which driver the tests run against, and refuses to run
// when TF_TEST_MODE promised something else: TF_TEST_MODE=double needs the
// double, TF_TEST_MODE=gpu a usable device of the real driver (a
// misconfigured machine must not turn into skipped tests).
func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		os.Exit(runChild(role)) // a program started by a test (nolib_test.go)
	}
	_, countErr := tenferro.DeviceCount() // loads the driver, if any
	double = testsupport.GetDouble()
	mode := os.Getenv("TF_TEST_MODE")
	switch {
	case double != nil && mode == "gpu":
		fmt.Fprintln(os.Stderr, "TF_TEST_MODE=gpu but the loaded libcuda.so.1 is the driver double")
		os.Exit(1)
	case double != nil:
		fmt.Println("tenferro Go tests: against the CUDA driver double")
	case mode == "double":
		fmt.Fprintln(os.Stderr, "TF_TEST_MODE=double but the loaded libcuda.so.1 is not the double:", countErr)
		os.Exit(1)
	case tenferro.GPUAvailable():
		d, _ := tenferro.DeviceInfo(0)
		v, cublasErr := tenferro.CublasVersion()
		fmt.Printf("tenferro Go tests: against the real CUDA driver on %s (cc %d.%d); cuBLAS %d %v; fault-injection tests skip\n",
			d.Name, d.ComputeCapabilityMajor, d.ComputeCapabilityMinor, v, errOrEmpty(cublasErr))
		if err := testsupport.Check(); err != nil {
			fmt.Fprintln(os.Stderr, "the tests cannot read the current CUDA context:", err)
			os.Exit(1)
		}
	case mode == "gpu":
		fmt.Fprintln(os.Stderr, "TF_TEST_MODE=gpu but no CUDA device is usable:", countErr)
		os.Exit(1)
	default:
		fmt.Println("tenferro Go tests: no CUDA device; tests that need one skip:", countErr)
	}
	os.Exit(m.Run())
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// requireDouble skips a test that needs fault injection, and resets the
// double for it.
func requireDouble(t *testing.T) *testsupport.Double {
	t.Helper()
	if double == nil {
		t.Skip("needs the CUDA driver double")
	}
	double.Reset()
	checkReleasedAtEnd(t)
	return double
}

// requireDevice skips a test that needs a device when there is none.
func requireDevice(t *testing.T) {
	t.Helper()
	if double == nil && !tenferro.GPUAvailable() {
		t.Skip("no CUDA device")
	}
	if double != nil {
		double.Reset()
		checkReleasedAtEnd(t)
	}
}

// released records the tests that check, at their end, that they left
// the primary context released.
var released struct {
	sync.Mutex
	checked map[*testing.T]bool
}

// checkReleasedAtEnd fails t when the primary context is still retained
// after the cleanups t registers from its first requireDevice or
// requireDouble on.  Whatever a test leaves open (an Event it never closed
// on a failing path, say) would otherwise be released by a finalizer some
// time later and fail, depending on timing, the next test that counts
// references.  The check then collects garbage so that such a leak ends
// with the test that made it.  A process of inOwnProcess exists for a
// deliberate leak and is not checked.
func checkReleasedAtEnd(t *testing.T) {
	t.Helper()
	if os.Getenv(ownProcessEnv) != "" {
		return
	}
	released.Lock()
	defer released.Unlock()
	if released.checked[t] {
		return
	}
	if released.checked == nil {
		released.checked = map[*testing.T]bool{}
	}
	released.checked[t] = true
	t.Cleanup(func() {
		released.Lock()
		delete(released.checked, t)
		released.Unlock()
		if n := double.PrimaryRefcount(0); n != 0 {
			t.Errorf("the primary context is retained %d times after the test's cleanups: %s",
				n, collectLeaked())
		}
	})
}

// collectLeaked runs the finalizers of what a test dropped and says
// whether that released the primary context.
func collectLeaked() string {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if double.PrimaryRefcount(0) == 0 {
			return "an object was dropped without Close (a finalizer released it)"
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "a reference is still open"
}

func newRuntime(t *testing.T, slots int) *tenferro.Runtime {
	t.Helper()
	requireDevice(t)
	opts := tenferro.DefaultOptions()
	opts.StreamSlots = slots
	rt, err := tenferro.NewRuntimeWithOptions(0, opts)
	if err != nil {
		t.Fatalf("NewRuntimeWithOptions: %v", err)
	}
	return rt
}

func closeRuntime(t *testing.T, rt *tenferro.Runtime) {
	t.Helper()
	if err := rt.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// bind returns a Stream on slot, closed at the end of the test.
func bind(t *testing.T, rt *tenferro.Runtime, slot int) *tenferro.Stream {
	t.Helper()
	s, err := rt.NewStream(slot)
	if err != nil {
		t.Fatalf("NewStream(%d): %v", slot, err)
	}
	if s.Slot() != slot {
		t.Fatalf("NewStream(%d).Slot() = %d", slot, s.Slot())
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// requireCapability skips when the runtime lacks a vendor library that is
// optional on a machine with a GPU (cuBLAS, NVRTC).  The double always has
// them and TF_TEST_MODE=gpu promises them, so there a missing one fails.
func requireCapability(t *testing.T, rt *tenferro.Runtime, c tenferro.Capability, what string) {
	t.Helper()
	ok, err := rt.Supports(c)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		if double != nil || os.Getenv("TF_TEST_MODE") != "" {
			t.Fatalf("%s cannot be loaded (TF_TEST_MODE=%q)", what, os.Getenv("TF_TEST_MODE"))
		}
		t.Skipf("%s cannot be loaded here (add it to LD_LIBRARY_PATH)", what)
	}
}

// must fails the test on an error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// asError asserts that err is a *tenferro.Error with the status, operation
// and message fragments given.
func asError(t *testing.T, err error, status tenferro.Status, op string, fragments ...string) *tenferro.Error {
	t.Helper()
	var e *tenferro.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *tenferro.Error with %v from %s, got %T %v", status, op, err, err)
	}
	if e.Status != status || e.Op != op {
		t.Fatalf("want status %d (%v) from %s, got %d (%v) from %q: %s",
			status, status, op, e.Status, e.Status, e.Op, e.Message)
	}
	if !errors.Is(err, status) {
		t.Fatalf("errors.Is(err, %v) is false for %v", status, err)
	}
	if !strings.HasPrefix(e.Message, op+": ") {
		t.Fatalf("message %q does not start with %q", e.Message, op+": ")
	}
	for _, f := range fragments {
		if !strings.Contains(e.Error(), f) {
			t.Fatalf("error %q lacks %q", e.Error(), f)
		}
	}
	return e
}
