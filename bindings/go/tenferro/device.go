// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

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

// GPUAvailable reports whether this process can use a CUDA device
// (tf_gpu_available): the library loads, the driver loads and reports a
// device, and a runtime on device 0 can be created and synchronized.  It
// never fails.
func GPUAvailable() bool { return gpuAvailable() }

// DeviceCount returns the number of CUDA devices (tf_device_count).  It
// creates no context.
func DeviceCount() (int, error) { return deviceCount() }

// DeviceInfo describes device `ordinal` (tf_device_info).  It creates no
// context.
func DeviceInfo(ordinal int) (DeviceProperties, error) {
	o, err := int32Arg("tf_device_info", "ordinal", ordinal)
	if err != nil {
		return DeviceProperties{}, err
	}
	return deviceInfo(o)
}
