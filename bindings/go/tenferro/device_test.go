// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

func TestDevicesAreDescribed(t *testing.T) {
	requireDevice(t)
	n, err := tenferro.DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	for i := 0; i < n; i++ {
		d, err := tenferro.DeviceInfo(i)
		if err != nil {
			t.Fatalf("DeviceInfo(%d): %v", i, err)
		}
		if d.Ordinal != i || d.Name == "" || d.TotalMemoryBytes == 0 || d.ComputeCapabilityMajor < 1 {
			t.Fatalf("DeviceInfo(%d) = %+v", i, d)
		}
		if d.UUID == ([16]byte{}) {
			t.Fatalf("device %d has a zero UUID", i)
		}
	}
}

func TestBadOrdinalsAreRefused(t *testing.T) {
	requireDevice(t)
	_, err := tenferro.DeviceInfo(-1)
	e := asError(t, err, tenferro.StatusInvalidArgument, "tf_device_info", "-1")
	if e.Domain != tenferro.CodeNone || e.Code != 0 || e.Call != "" {
		t.Fatalf("a refusal of the library itself carries no code: %+v", e)
	}
	n, _ := tenferro.DeviceCount()
	_, err = tenferro.DeviceInfo(n + 40)
	asError(t, err, tenferro.StatusDeviceUnavailable, "tf_device_info")
	_, err = tenferro.NewRuntime(n + 40)
	asError(t, err, tenferro.StatusDeviceUnavailable, "tf_runtime_new")
	// Values that do not fit int32_t are refused before the call, not wrapped.
	_, err = tenferro.DeviceInfo(1 << 32)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_device_info", "does not fit in int32_t")
}

// A driver failure reaches Go with the failing call and its CUresult.
func TestDriverFailureCarriesCallAndCode(t *testing.T) {
	d := requireDouble(t)
	d.Fail("cuDeviceGetCount", 1, testsupport.CudaErrorUnknown, 1)
	_, err := tenferro.DeviceCount()
	e := asError(t, err, tenferro.StatusCUDA, "tf_device_count", "cuDeviceGetCount", "CUDA_ERROR_UNKNOWN (999)")
	if e.Call != "cuDeviceGetCount" || e.Code != testsupport.CudaErrorUnknown || e.Domain != tenferro.CodeCUDA {
		t.Fatalf("error record %+v", e)
	}
	if n, err := tenferro.DeviceCount(); err != nil || n != 1 {
		t.Fatalf("after the fault: %d, %v", n, err)
	}
}
