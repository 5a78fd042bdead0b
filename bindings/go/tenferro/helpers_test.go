package tenferro_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// double is the driver double's control interface, nil against the real
// driver (set by TestMain).
var double *testsupport.Double

// TestMain says which driver the tests run against, and refuses to run
// against the real one when TF_TEST_MODE=double promised the double (a
// misconfigured LD_LIBRARY_PATH must not turn into skipped tests).
func TestMain(m *testing.M) {
	_, countErr := tenferro.DeviceCount() // loads the driver, if any
	double = testsupport.GetDouble()
	switch {
	case double != nil:
		fmt.Println("tenferro Go tests: against the CUDA driver double")
	case os.Getenv("TF_TEST_MODE") == "double":
		fmt.Fprintln(os.Stderr, "TF_TEST_MODE=double but the loaded libcuda.so.1 is not the double:", countErr)
		os.Exit(1)
	case tenferro.GPUAvailable():
		fmt.Println("tenferro Go tests: against the real CUDA driver (fault-injection tests skip)")
	default:
		fmt.Println("tenferro Go tests: no CUDA device; tests that need one skip:", countErr)
	}
	os.Exit(m.Run())
}

// requireDouble skips a test that needs fault injection, and resets the
// double for it.
func requireDouble(t *testing.T) *testsupport.Double {
	t.Helper()
	if double == nil {
		t.Skip("needs the CUDA driver double")
	}
	double.Reset()
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
	}
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
