package tenferro

// #include "shim.h"
import "C"

import "unsafe"

// DeviceProperties is what the driver reports about one device
// (tf_device_properties).
type DeviceProperties struct {
	Ordinal                int
	Name                   string   // e.g. "NVIDIA H200"
	UUID                   [16]byte // as nvidia-smi's GPU-... shows it
	ComputeCapabilityMajor int
	ComputeCapabilityMinor int
	TotalMemoryBytes       uint64
	MultiprocessorCount    int
	PCIDomainID            int
	PCIBusID               int
	PCIDeviceID            int
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

// GPUAvailable reports whether this process can use a CUDA device
// (tf_gpu_available): the driver loads, reports a device, and a runtime on
// device 0 can be created and synchronized.  It never fails.
func GPUAvailable() bool { return C.tf_gpu_available() != 0 }

// DeviceCount returns the number of CUDA devices (tf_device_count).  It
// creates no context.
func DeviceCount() (int, error) {
	var n C.int32_t
	if err := takeError(C.go_tf_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceInfo describes device `ordinal` (tf_device_info).  It creates no
// context.
func DeviceInfo(ordinal int) (DeviceProperties, error) {
	const op = "tf_device_info"
	o, err := int32Arg(op, "ordinal", ordinal)
	if err != nil {
		return DeviceProperties{}, err
	}
	var p C.tf_device_properties
	C.tf_device_properties_init(&p, C.size_t(unsafe.Sizeof(p)))
	if err := takeError(C.go_tf_device_info(o, &p)); err != nil {
		return DeviceProperties{}, err
	}
	return devicePropertiesFromC(&p), nil
}
