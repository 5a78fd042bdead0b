// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build !cgo

package tenferro_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// Built without cgo, every entry point returns an *Error that is
// ErrNotAvailable (and StatusLibraryNotFound), and a program carries on.
func TestWithoutCgoEverythingIsNotAvailable(t *testing.T) {
	calls := map[string]func() error{
		"tf_runtime_new": func() error { _, err := tenferro.NewRuntime(0); return err },
		"tf_runtime_new_with_options": func() error {
			_, err := tenferro.NewRuntimeWithOptions(0, tenferro.DefaultOptions())
			return err
		},
		"tf_device_count":     func() error { _, err := tenferro.DeviceCount(); return err },
		"tf_device_info":      func() error { _, err := tenferro.DeviceInfo(0); return err },
		"tf_cublas_version":   func() error { _, err := tenferro.CublasVersion(); return err },
		"tf_cublas_symbol":    func() error { _, err := tenferro.CublasSymbol("cublasSgemm_v2"); return err },
		"tf_set_log_callback": func() error { return tenferro.SetLogCallback(nil) },
		"tf_version":          func() error { _, err := tenferro.LibraryPath(); return err },
	}
	for op, call := range calls {
		err := call()
		var e *tenferro.Error
		if !errors.Is(err, tenferro.ErrNotAvailable) || !errors.Is(err, tenferro.StatusLibraryNotFound) ||
			!errors.As(err, &e) || e.Op != op || !strings.Contains(e.Message, "built without cgo") ||
			!strings.Contains(e.Message, "build with CGO_ENABLED=1") {
			t.Errorf("%s: %v", op, err)
		}
	}
	if tenferro.GPUAvailable() || tenferro.Version() != 0 || tenferro.VersionString() != "" {
		t.Fatal("a build without cgo reports a library")
	}
	if tenferro.HeaderVersion != 10200 {
		t.Fatalf("HeaderVersion %d", tenferro.HeaderVersion)
	}
	d := tenferro.DefaultOptions()
	if d.StreamSlots != 8 || d.CublasWorkspaceBytes != 32<<20 || d.RetirementCapacity != 1024 {
		t.Fatalf("DefaultOptions = %+v", d)
	}
	if s := tenferro.StatusLibraryNotFound.String(); s != "StatusLibraryNotFound" {
		t.Fatalf("StatusLibraryNotFound.String() = %q", s)
	}
}

// Objects cannot be made, and the zero values fail cleanly, as with cgo.
func TestWithoutCgoZeroValuesAreInvalidHandles(t *testing.T) {
	var r *tenferro.Runtime
	var s tenferro.Stream
	for name, err := range map[string]error{
		"Runtime.Sync":         r.Sync(),
		"Stream.SyncContext":   s.SyncContext(context.Background()),
		"Upload":               tenferro.Upload(&s, 0, []float32{1}),
		"Event.Close":          (&tenferro.Event{}).Close(),
		"HostAlloc":            second(s.HostAlloc(64)),
		"HostRegister":         second(r.HostRegister(nil, 64)),
		"HostStats":            second(r.HostStats()),
		"HostTrim":             r.HostTrim(),
		"DownloadAsync":        second(tenferro.DownloadAsync(&s, []byte{0}, 0)),
		"UploadAsync":          second(tenferro.UploadAsync(&s, 0, []byte{0})),
		"HostBuffer.RecordUse": (&tenferro.HostBuffer{}).RecordUse(&s),
		"HostBuffer.With":      (&tenferro.HostBuffer{}).With(func([]byte) {}),
	} {
		if !errors.Is(err, tenferro.StatusInvalidHandle) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// MapHostMemory needs no library: it maps memory for a program that may
// register it once a library is there.
func TestWithoutCgoHostMemoryWorks(t *testing.T) {
	m, err := tenferro.MapHostMemory(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.With(func(b []byte) { b[4095] = 1 }); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil || m.Ptr() != nil {
		t.Fatalf("Close: %v, Ptr %p", err, m.Ptr())
	}
}
