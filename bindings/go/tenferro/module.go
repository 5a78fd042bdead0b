package tenferro

// #include "shim.h"
import "C"

import (
	"math"
	"reflect"
	"runtime"
	"unsafe"
)

// Module is one reference to a loaded module image (a CUmodule) in a
// runtime's primary context (tf_module).  It keeps its runtime alive until
// its last reference is released; a finalizer releases a Module that was
// never closed and that no Function refers to any more.
type Module struct {
	h *handle
}

func newModule(ptr *C.tf_module) *Module {
	m := &Module{h: newHandle(unsafe.Pointer(ptr), "Module", "tf_module_release",
		dropWith(func(p unsafe.Pointer) *C.tf_error_info { return C.go_tf_module_release((*C.tf_module)(p)) }))}
	runtime.SetFinalizer(m, func(m *Module) { m.h.close() })
	return m
}

// LoadModule loads a PTX, CUBIN or fatbin image into the runtime's primary
// context (tf_module_load).  PTX need not end with a NUL byte.
func (r *Runtime) LoadModule(image []byte) (*Module, error) {
	var ptr *C.tf_module
	p, n := sliceBytes(image)
	err := r.do("tf_module_load", func(rt *C.tf_runtime) *C.tf_error_info { return C.go_tf_module_load(rt, p, n, &ptr) })
	if err != nil {
		return nil, err
	}
	return newModule(ptr), nil
}

// Clone returns a new reference to the same module (tf_module_retain).
func (m *Module) Clone() (*Module, error) {
	var ptr *C.tf_module
	err := m.h.useC("tf_module_retain", func(p unsafe.Pointer) *C.tf_error_info {
		ptr = (*C.tf_module)(p)
		return C.go_tf_module_retain(ptr)
	})
	if err != nil {
		return nil, err
	}
	return newModule(ptr), nil
}

// Close releases this reference (tf_module_release); the last one unloads
// the module, after which its Functions fail with StatusInvalidHandle.
func (m *Module) Close() error {
	runtime.SetFinalizer(m, nil)
	return m.h.close()
}

// Function is a kernel of a Module.  It refers to its Module, so the
// module stays loaded while the Function is reachable (unless the Module is
// closed).
type Function struct {
	module *Module
	ptr    unsafe.Pointer
	Name   string
}

// Function finds a kernel by its name in the image: the plain name of an
// extern "C" kernel, the mangled one of a C++ kernel (tf_module_function).
func (m *Module) Function(name string) (*Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var fn unsafe.Pointer
	err := m.h.useC("tf_module_function", func(p unsafe.Pointer) *C.tf_error_info {
		return C.go_tf_module_function((*C.tf_module)(p), cname, &fn)
	})
	if err != nil {
		return nil, err
	}
	return &Function{module: m, ptr: fn, Name: name}, nil
}

// Pointer is the CUfunction, valid while the module is loaded.
func (f *Function) Pointer() unsafe.Pointer { return f.ptr }

// FuncMaxDynamicSharedSizeBytes is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
// needed before a launch with more than 48 KiB of dynamic shared memory.
const FuncMaxDynamicSharedSizeBytes = 8

// SetAttribute sets a CUfunction_attribute of the kernel
// (tf_function_set_attribute).
func (f *Function) SetAttribute(attribute, value int) error {
	const op = "tf_function_set_attribute"
	a, err := int32Arg(op, "attribute", attribute)
	if err != nil {
		return err
	}
	v, err := int32Arg(op, "value", value)
	if err != nil {
		return err
	}
	return f.module.h.useC(op, func(p unsafe.Pointer) *C.tf_error_info {
		return C.go_tf_function_set_attribute((*C.tf_module)(p), f.ptr, a, v)
	})
}

// Dim3 is a launch dimension; a zero component means 1.
type Dim3 struct{ X, Y, Z uint32 }

// LaunchConfig is the shape of a kernel launch (tf_launch_config).
type LaunchConfig struct {
	Grid              Dim3   // blocks
	Block             Dim3   // threads per block
	SharedMemoryBytes uint32 // dynamic shared memory
}

// Blocks1D is a one-dimensional launch of n threads in blocks of
// threadsPerBlock (the last block partly idle).
func Blocks1D(n, threadsPerBlock int) LaunchConfig {
	if threadsPerBlock < 1 {
		threadsPerBlock = 1
	}
	blocks := (n + threadsPerBlock - 1) / threadsPerBlock
	if blocks < 1 {
		blocks = 1
	}
	if blocks > math.MaxUint32 {
		blocks = math.MaxUint32 // the driver refuses it
	}
	return LaunchConfig{Grid: Dim3{X: uint32(blocks)}, Block: Dim3{X: uint32(threadsPerBlock)}}
}

func orOne(v uint32) C.uint32_t {
	if v == 0 {
		return 1
	}
	return C.uint32_t(v)
}

func (c LaunchConfig) toC() C.tf_launch_config {
	var l C.tf_launch_config
	C.tf_launch_config_init(&l, C.size_t(unsafe.Sizeof(l)))
	l.grid_x, l.grid_y, l.grid_z = orOne(c.Grid.X), orOne(c.Grid.Y), orOne(c.Grid.Z)
	l.block_x, l.block_y, l.block_z = orOne(c.Block.X), orOne(c.Block.Y), orOne(c.Block.Z)
	l.shared_memory_bytes = C.uint32_t(c.SharedMemoryBytes)
	return l
}

// Launch queues f on the current slot's stream (tf_kernel_launch) and
// returns once it is queued; faults the kernel meets show up in later
// calls.  args are the kernel's parameters in order, each a Go value of
// the parameter's C type: DevicePtr for a pointer, uint32 for an unsigned,
// float32 for a float, or a struct or array of such (anything without Go
// pointers; int and uint are refused, their size is not C's int).  It
// takes no slot lock, so it may be called from StreamEnqueue and
// CublasEnqueue callbacks.
func (r *Runtime) Launch(f *Function, config LaunchConfig, args ...interface{}) error {
	const op = "tf_kernel_launch"
	if f == nil {
		return bindingError(StatusInvalidArgument, op, "the Function is nil")
	}
	params, err := kernelParams(op, args)
	if err != nil {
		return err
	}
	defer params.free()
	cfg := config.toC()
	return useBoth(op, r.h, f.module.h, func(p, _ unsafe.Pointer) *C.tf_error_info {
		return C.go_tf_kernel_launch((*C.tf_runtime)(p), f.ptr, &cfg, params.argv)
	})
}

// cParams is kernelParams in C memory: cuLaunchKernel reads an array of
// pointers to the values, which cgo forbids in Go memory.
type cParams struct {
	argv   *unsafe.Pointer // len(args) pointers into values
	values unsafe.Pointer
}

func (p cParams) free() {
	C.free(unsafe.Pointer(p.argv))
	C.free(p.values)
}

func kernelParams(op string, args []interface{}) (cParams, error) {
	if len(args) == 0 {
		return cParams{}, nil
	}
	vals := make([]reflect.Value, len(args))
	offsets := make([]uintptr, len(args))
	size := uintptr(0)
	for i, a := range args {
		v := reflect.ValueOf(a)
		if !v.IsValid() || !plainData(v.Type()) {
			return cParams{}, bindingError(StatusInvalidArgument, op,
				"kernel argument %d (%T) is not a fixed-size value without Go pointers", i, a)
		}
		align := uintptr(v.Type().Align())
		size = (size + align - 1) / align * align
		offsets[i], vals[i] = size, v
		size += v.Type().Size()
	}
	p := cParams{
		argv:   (*unsafe.Pointer)(C.malloc(C.size_t(len(args)) * C.size_t(unsafe.Sizeof(unsafe.Pointer(nil))))),
		values: C.malloc(C.size_t(size + 1)),
	}
	argv := unsafe.Slice(p.argv, len(args))
	for i, v := range vals {
		dst := unsafe.Add(p.values, offsets[i])
		// Copy the value's bytes: an addressable copy gives their address.
		tmp := reflect.New(v.Type())
		tmp.Elem().Set(v)
		copy(unsafe.Slice((*byte)(dst), v.Type().Size()), unsafe.Slice((*byte)(tmp.UnsafePointer()), v.Type().Size()))
		argv[i] = dst
	}
	return p, nil
}

// plainData reports whether values of t are fixed-size bytes a kernel can
// take: numbers, bools, and arrays and structs of them.
func plainData(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return plainData(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if !plainData(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
