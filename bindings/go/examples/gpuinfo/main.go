// SPDX-License-Identifier: MIT OR Apache-2.0
// Command gpuinfo lists the CUDA devices tenferro-gpu can use, or says
// that there is no GPU.  A program that merely can use a GPU must start and
// carry on where there is none: this one exits 0 either way, also where
// libtenferro_gpu.so.1 is absent or the program was built without cgo
// (tenferro.ErrNotAvailable).  make check-go runs it with the library
// absent.
package main

import (
	"errors"
	"fmt"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

func main() {
	n, err := tenferro.DeviceCount()
	if errors.Is(err, tenferro.ErrNotAvailable) {
		fmt.Println("no GPU (the library is not available):", err)
		return
	}
	if err != nil {
		fmt.Println("no GPU:", err) // no driver, no device, ...
		return
	}
	path, _ := tenferro.LibraryPath()
	fmt.Printf("tenferro-gpu %s from %s: %d device(s)\n", tenferro.VersionString(), path, n)
	for i := 0; i < n; i++ {
		d, err := tenferro.DeviceInfo(i)
		if err != nil {
			fmt.Printf("device %d: %v\n", i, err)
			continue
		}
		fmt.Printf("device %d: %s, compute capability %d.%d, %d MiB\n",
			i, d.Name, d.ComputeCapabilityMajor, d.ComputeCapabilityMinor, d.TotalMemoryBytes>>20)
	}
}
