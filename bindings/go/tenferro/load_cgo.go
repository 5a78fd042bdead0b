// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

// The header: an installed one on the compiler's path, or that of the
// checkout this package sits in (bindings/go/tenferro/../../../include).
// The library itself is opened at run time (shim.c), or linked with the
// build tag tenferro_linked (linked_cgo.go).

// #cgo CFLAGS: -I${SRCDIR}/../../../include
// #cgo LDFLAGS: -ldl
// #include "shim.h"
import "C"

import (
	"sync"
	"unsafe"
)

// headerVersionNumber is HeaderVersion: the header's.
const headerVersionNumber = C.TF_VERSION_NUMBER

// library is the outcome of loading libtenferro_gpu.so.1, once.
var library struct {
	once sync.Once
	why  string // "" once loaded
	path string
}

// load makes the library's functions callable and returns nil, or the
// error of op saying why they are not.  Every entry point that needs no
// object (NewRuntime, DeviceCount, ...) calls it first; objects exist only
// once it succeeded.
func load(op string) error {
	library.once.Do(func() {
		var why [1024]C.char
		if C.tfgo_load(&why[0], C.size_t(len(why))) != 0 {
			library.why = C.GoString(&why[0])
			if library.why == "" {
				library.why = "unknown reason"
			}
			return
		}
		library.path = C.GoString(C.tfgo_library_path())
	})
	if library.why != "" {
		return notAvailable(op, "libtenferro_gpu.so.1 could not be loaded: "+library.why)
	}
	return nil
}

func libraryPath() (string, error) {
	if err := load("tf_version"); err != nil {
		return "", err
	}
	return library.path, nil
}

// takeError turns what a shim wrapper returned into an error (nil for
// NULL) and frees the C copy.
func takeError(info *C.tf_error_info) error {
	if info == nil {
		return nil
	}
	defer C.tfgo_error_free(info)
	e := &Error{
		Status:  Status(info.status),
		Domain:  CodeDomain(info.code_domain),
		Code:    int32(info.code),
		Op:      C.GoString(&info.operation[0]),
		Call:    C.GoString(&info.call[0]),
		Message: C.GoString(&info.message[0]),
	}
	// The shim's record of an optional function the library lacks (the
	// library itself never names dlsym as the failing call).
	if e.Status == StatusNotSupported && e.Call == "dlsym" {
		e.cause = ErrLibraryTooOld
	}
	return e
}

func statusText(s Status) (string, bool) {
	if load("tf_status_string") != nil {
		return "", false
	}
	return C.GoString(C.go_tf_status_string(C.tf_status(s))), true
}

func libraryVersion() (uint32, string, bool) {
	if load("tf_version") != nil {
		return 0, "", false
	}
	return uint32(C.go_tf_version()), C.GoString(C.go_tf_version_string()), true
}

func gpuAvailable() bool {
	return load("tf_gpu_available") == nil && C.go_tf_gpu_available() != 0
}

func deviceCount() (int, error) {
	if err := load("tf_device_count"); err != nil {
		return 0, err
	}
	var n C.int32_t
	if err := takeError(C.go_tf_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

func deviceInfo(ordinal int32) (DeviceProperties, error) {
	if err := load("tf_device_info"); err != nil {
		return DeviceProperties{}, err
	}
	var p C.tf_device_properties
	C.go_tf_device_properties_init(&p, C.size_t(unsafe.Sizeof(p)))
	if err := takeError(C.go_tf_device_info(C.int32_t(ordinal), &p)); err != nil {
		return DeviceProperties{}, err
	}
	return devicePropertiesFromC(&p), nil
}

func devicePropertiesFromC(p *C.tf_device_properties) DeviceProperties {
	d := DeviceProperties{
		Ordinal:                int(p.ordinal),
		Name:                   C.GoString(&p.name[0]),
		ComputeCapabilityMajor: int(p.compute_capability_major),
		ComputeCapabilityMinor: int(p.compute_capability_minor),
		TotalMemoryBytes:       uint64(p.total_memory_bytes),
		MultiprocessorCount:    int(p.multiprocessor_count),
		PCIDomainID:            int(p.pci_domain_id),
		PCIBusID:               int(p.pci_bus_id),
		PCIDeviceID:            int(p.pci_device_id),
	}
	for i := range d.UUID {
		d.UUID[i] = byte(p.uuid[i])
	}
	return d
}

func libraryDefaultOptions() (Options, bool) {
	if load("tf_runtime_options_init") != nil {
		return Options{}, false
	}
	var o C.tf_runtime_options
	C.go_tf_runtime_options_init(&o, C.size_t(unsafe.Sizeof(o)))
	return Options{
		StreamSlots:          int(o.stream_slots),
		CublasWorkspaceBytes: uint64(o.cublas_workspace_bytes),
		RetirementCapacity:   int(o.retirement_capacity),
		DownloadThreads:      int(o.download_threads),
		DownloadChunkBytes:   int(o.download_chunk_bytes),
		// The 1.2 fields; an older library leaves them 0.
		MemoryReleaseThreshold: uint64(o.memory_release_threshold),
		MemoryReservedLimit:    uint64(o.memory_reserved_limit),
	}, true
}

func runtimeNew(ordinal int32, v *optionValues) (unsafe.Pointer, error) {
	op := "tf_runtime_new"
	if v != nil {
		op = "tf_runtime_new_with_options"
	}
	if err := load(op); err != nil {
		return nil, err
	}
	var ptr *C.tf_runtime
	if v == nil {
		err := takeError(C.go_tf_runtime_new(C.int32_t(ordinal), &ptr))
		return unsafe.Pointer(ptr), err
	}
	var c C.tf_runtime_options
	C.go_tf_runtime_options_init(&c, C.size_t(unsafe.Sizeof(c)))
	c.stream_slots, c.retirement_capacity = C.uint32_t(v.slots), C.uint32_t(v.retirement)
	c.download_threads, c.download_chunk_bytes = C.uint32_t(v.threads), C.uint32_t(v.chunk)
	c.cublas_workspace_bytes = C.uint64_t(v.workspace)
	c.memory_release_threshold, c.memory_reserved_limit = C.uint64_t(v.releaseThreshold), C.uint64_t(v.reservedLimit)
	err := takeError(C.go_tf_runtime_new_with_options(C.int32_t(ordinal), &c, &ptr))
	return unsafe.Pointer(ptr), err
}
