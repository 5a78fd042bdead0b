// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// childRoleEnv makes the test binary, started again by a test, act as a
// small program instead of running the tests (see TestMain).
const childRoleEnv = "TENFERRO_GO_TEST_CHILD"

// runChild is what a program that merely can use a GPU does: try, and
// report "no GPU" rather than fail.  It prints one "key: value" line per
// fact for the test that started it, and exits 0.
func runChild(role string) int {
	switch role {
	case "probe":
	case "old":
		return runOldLibraryChild()
	default:
		fmt.Println("unknown child role", role)
		return 2
	}
	path, pathErr := tenferro.LibraryPath()
	fmt.Printf("library: %s\n", path)
	rt, err := tenferro.NewRuntime(0)
	if err == nil {
		rt.Close()
	}
	fmt.Printf("runtime error: %v\n", err)
	fmt.Printf("not available: %v %v\n", errors.Is(err, tenferro.ErrNotAvailable), errors.Is(pathErr, tenferro.ErrNotAvailable))
	fmt.Printf("status: %v\n", errors.Is(err, tenferro.StatusLibraryNotFound))
	fmt.Printf("gpu available: %v\n", tenferro.GPUAvailable())
	fmt.Printf("version: %d\n", tenferro.Version())
	return 0
}

// runOldLibraryChild runs against a library that lacks the 1.1 and 1.2
// functions (oldlib_test.go builds one): the runtime works, and each such call
// prints "name: <ErrLibraryTooOld> <status> <op>|<message>".
func runOldLibraryChild() int {
	fmt.Printf("version: %d\n", tenferro.Version())
	rt, err := tenferro.NewRuntime(0)
	fmt.Printf("runtime error: %v\n", err)
	if err != nil {
		return 0
	}
	report := func(name string, err error) {
		var e *tenferro.Error
		if !errors.As(err, &e) {
			fmt.Printf("%s: not a *tenferro.Error: %v\n", name, err)
			return
		}
		fmt.Printf("%s: %v %v %s|%s\n", name, errors.Is(err, tenferro.ErrLibraryTooOld), e.Status == tenferro.StatusNotSupported, e.Op, e.Message)
	}
	_, err = rt.HostAlloc(64)
	report("HostAlloc", err)
	mem, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err == nil {
		_, err = rt.HostRegister(unsafe.Pointer(&mem[0]), len(mem))
	}
	report("HostRegister", err)
	_, err = rt.HostStats()
	report("HostStats", err)
	report("HostTrim", rt.HostTrim())
	_, err = tenferro.DownloadAsync(rt, mem, 0)
	report("DownloadAsync", err)
	_, err = tenferro.UploadAsync(rt, 0, mem)
	report("UploadAsync", err)
	_, err = rt.MemoryStats()
	report("MemoryStats", err)
	report("ResetPeakMemoryStats", rt.ResetPeakMemoryStats())
	report("TrimMemory", rt.TrimMemory(0))
	report("RecordUse", rt.RecordUse(0x1000))
	if s, err := rt.NewStream(0); err == nil {
		_, err = s.Capture(func() error { panic("the function of a capture on a 1.0 library") })
		report("Capture", err)
		s.Close()
	}
	prog, err := rt.Compile("extern \"C\" __global__ void k() {}", nil)
	if err == nil {
		_, err = prog.Clone()
		report("ProgramClone", err)
		fmt.Printf("program close: %v\n", prog.Close())
	}
	fmt.Printf("close: %v\n", rt.Close())
	return 0
}
