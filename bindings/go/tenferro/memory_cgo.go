// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

// #include "shim.h"
import "C"

import (
	"errors"
	"unsafe"
)

// Device memory, transfers, modules, kernels, NVRTC and cuBLAS.

func deviceAlloc(p unsafe.Pointer, n uintptr) (DevicePtr, error) {
	var v C.uint64_t
	err := takeError(C.go_tf_alloc(crt(p), C.size_t(n), &v))
	return DevicePtr(v), err
}

func deviceFree(p unsafe.Pointer, ptr DevicePtr) error {
	return takeError(C.go_tf_free(crt(p), C.uint64_t(ptr)))
}

func upload(p unsafe.Pointer, src unsafe.Pointer, dst DevicePtr, n uintptr) (failedCopy, error) {
	return copyResult(C.tfgo_upload(crt(p), src, C.uint64_t(dst), C.size_t(n)))
}

func download(p unsafe.Pointer, src DevicePtr, dst unsafe.Pointer, n uintptr) (failedCopy, error) {
	return copyResult(C.tfgo_download(crt(p), C.uint64_t(src), dst, C.size_t(n)))
}

func copyResult(r C.tfgo_copy_result) (failedCopy, error) {
	return failedCopy{recorded: Status(r.recorded), slot: int(r.slot)}, takeError(r.error)
}

func downloadScalar(p unsafe.Pointer, src DevicePtr, out unsafe.Pointer, n uintptr) error {
	return takeError(C.go_tf_download_scalar(crt(p), C.uint64_t(src), out, C.size_t(n)))
}

func deviceCopy(p unsafe.Pointer, src, dst DevicePtr, n uintptr) error {
	return takeError(C.go_tf_copy(crt(p), C.uint64_t(src), C.uint64_t(dst), C.size_t(n)))
}

func peerCopyAvailable(a, b unsafe.Pointer) (bool, error) {
	var v C.int32_t
	err := takeError(C.go_tf_peer_copy_available(crt(a), crt(b), &v))
	return v != 0, err
}

func peerCopy(a unsafe.Pointer, src DevicePtr, b unsafe.Pointer, dst DevicePtr, n uintptr) error {
	return takeError(C.go_tf_peer_copy(crt(a), C.uint64_t(src), crt(b), C.uint64_t(dst), C.size_t(n)))
}

func cmod(p unsafe.Pointer) *C.tf_module { return (*C.tf_module)(p) }

func moduleLoad(p unsafe.Pointer, image unsafe.Pointer, n uintptr) (unsafe.Pointer, error) {
	var out *C.tf_module
	err := takeError(C.go_tf_module_load(crt(p), image, C.size_t(n), &out))
	return unsafe.Pointer(out), err
}

func moduleRetain(m unsafe.Pointer) error  { return takeError(C.go_tf_module_retain(cmod(m))) }
func moduleRelease(m unsafe.Pointer) error { return takeError(C.go_tf_module_release(cmod(m))) }

func moduleFunction(m unsafe.Pointer, name string) (unsafe.Pointer, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var fn unsafe.Pointer
	err := takeError(C.go_tf_module_function(cmod(m), cname, &fn))
	return fn, err
}

func functionSetAttribute(m, fn unsafe.Pointer, attribute, value int32) error {
	return takeError(C.go_tf_function_set_attribute(cmod(m), fn, C.int32_t(attribute), C.int32_t(value)))
}

func kernelLaunch(p, fn unsafe.Pointer, config *LaunchConfig, params paramLayout) error {
	var l C.tf_launch_config
	C.go_tf_launch_config_init(&l, C.size_t(unsafe.Sizeof(l)))
	l.grid_x, l.grid_y, l.grid_z = C.uint32_t(config.Grid.X), C.uint32_t(config.Grid.Y), C.uint32_t(config.Grid.Z)
	l.block_x, l.block_y, l.block_z = C.uint32_t(config.Block.X), C.uint32_t(config.Block.Y), C.uint32_t(config.Block.Z)
	l.shared_memory_bytes = C.uint32_t(config.SharedMemoryBytes)
	var argv *unsafe.Pointer
	if n := len(params.values); n > 0 {
		argv = (*unsafe.Pointer)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))))
		defer C.free(unsafe.Pointer(argv))
		block := C.malloc(C.size_t(params.size + 1))
		defer C.free(block)
		params.copyTo(block, unsafe.Slice(argv, n))
	}
	return takeError(C.go_tf_kernel_launch(crt(p), fn, &l, argv))
}

func cprog(p unsafe.Pointer) *C.tf_program { return (*C.tf_program)(p) }

// programCompile passes the options as C memory: the library reads an
// array of pointers to strings, which cgo forbids in Go memory.
func programCompile(p unsafe.Pointer, source string, v *compileValues) (unsafe.Pointer, error) {
	var c C.tf_compile_options
	C.go_tf_compile_options_init(&c, C.size_t(unsafe.Sizeof(c)))
	var strings []unsafe.Pointer
	cstring := func(s string) *C.char {
		cs := C.CString(s)
		strings = append(strings, unsafe.Pointer(cs))
		return cs
	}
	defer func() {
		for _, s := range strings {
			C.free(s)
		}
	}()
	c.target, c.arch, c.option_count = C.int32_t(v.target), C.int32_t(v.arch), C.int32_t(len(v.options))
	if len(v.options) > 0 {
		argv := (**C.char)(C.malloc(C.size_t(len(v.options)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		defer C.free(unsafe.Pointer(argv))
		for i, s := range v.options {
			unsafe.Slice(argv, len(v.options))[i] = cstring(s)
		}
		c.options = argv
	}
	if v.name != "" {
		c.name = cstring(v.name)
	}
	src := cstring(source)
	var out *C.tf_program
	err := takeError(C.go_tf_program_compile(crt(p), src, &c, &out))
	return unsafe.Pointer(out), err
}

func programImage(p unsafe.Pointer) ([]byte, error) {
	var img unsafe.Pointer
	var n C.size_t
	if err := takeError(C.go_tf_program_image(cprog(p), &img, &n)); err != nil {
		return nil, err
	}
	return C.GoBytes(img, C.int(n)), nil
}

func programLog(p unsafe.Pointer) (string, error) {
	var log *C.char
	if err := takeError(C.go_tf_program_log(cprog(p), &log)); err != nil {
		return "", err
	}
	return C.GoString(log), nil
}

func programRetain(p unsafe.Pointer) error { return takeError(C.go_tf_program_retain(cprog(p))) }

// programRelease drops one reference with tf_program_release_checked (1.1)
// and returns its error; a 1.0 library lacks it, and its
// tf_program_release reports nothing.
func programRelease(p unsafe.Pointer) error {
	err := takeError(C.go_tf_program_release_checked(cprog(p)))
	if errors.Is(err, ErrLibraryTooOld) {
		C.go_tf_program_release(cprog(p))
		return nil
	}
	return err
}

func cublasVersion() (int, error) {
	if err := load("tf_cublas_version"); err != nil {
		return 0, err
	}
	var v C.int32_t
	if err := takeError(C.go_tf_cublas_version(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

func cublasSymbol(name string) (unsafe.Pointer, error) {
	if err := load("tf_cublas_symbol"); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var fn unsafe.Pointer
	if err := takeError(C.go_tf_cublas_symbol(cname, &fn)); err != nil {
		return nil, err
	}
	return fn, nil
}

// gemmCall calls cublasSgemm_v2 (alpha and beta *float32, or nil) or
// cublasDgemm_v2 (*float64) through o.fn; it returns the cublasStatus_t.
func gemmCall(o *gemmOperands, double bool, alpha, beta unsafe.Pointer) int32 {
	g := &o.args
	d := C.int(0)
	if double {
		d = 1
	}
	return int32(C.tfgo_gemm(d, o.fn, o.handle, C.int32_t(o.transA), C.int32_t(o.transB),
		C.int32_t(g.m), C.int32_t(g.n), C.int32_t(g.k), alpha, C.uint64_t(o.alphaDev),
		C.uint64_t(o.a), C.int32_t(g.lda), C.uint64_t(o.b), C.int32_t(g.ldb),
		beta, C.uint64_t(o.betaDev), C.uint64_t(o.c), C.int32_t(g.ldc)))
}
