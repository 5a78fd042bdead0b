// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

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

func newModule(ptr unsafe.Pointer) *Module {
	m := &Module{h: newHandle(ptr, "Module", "tf_module_release", moduleRelease)}
	runtime.SetFinalizer(m, func(m *Module) { m.h.close() })
	return m
}

// LoadModule loads a PTX, CUBIN or fatbin image into the runtime's primary
// context (tf_module_load).  PTX need not end with a NUL byte.
func (r *Runtime) LoadModule(image []byte) (*Module, error) {
	var ptr unsafe.Pointer
	p, n := sliceBytes(image)
	err := r.do("tf_module_load", func(rt unsafe.Pointer) (err error) {
		ptr, err = moduleLoad(rt, p, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	return newModule(ptr), nil
}

// Clone returns a new reference to the same module (tf_module_retain).
func (m *Module) Clone() (*Module, error) {
	var ptr unsafe.Pointer
	err := m.handle().use("tf_module_retain", func(p unsafe.Pointer) error {
		ptr = p
		return moduleRetain(p)
	})
	if err != nil {
		return nil, err
	}
	return newModule(ptr), nil
}

// Close releases this reference (tf_module_release); the last one unloads
// the module, after which its Functions fail with StatusInvalidHandle.
func (m *Module) Close() error {
	if m == nil {
		return errNotOpen("tf_module_release")
	}
	runtime.SetFinalizer(m, nil)
	return m.h.close()
}

// handle is m's handle, nil for a nil Module.
func (m *Module) handle() *handle {
	if m == nil {
		return nil
	}
	return m.h
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
	var fn unsafe.Pointer
	err := m.handle().use("tf_module_function", func(p unsafe.Pointer) (err error) {
		fn, err = moduleFunction(p, name)
		return err
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
	return f.module.handle().use(op, func(p unsafe.Pointer) error {
		return functionSetAttribute(p, f.ptr, a, v)
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

func orOne(v uint32) uint32 {
	if v == 0 {
		return 1
	}
	return v
}

// withOnes is c with every zero dimension made 1.
func (c LaunchConfig) withOnes() LaunchConfig {
	c.Grid = Dim3{orOne(c.Grid.X), orOne(c.Grid.Y), orOne(c.Grid.Z)}
	c.Block = Dim3{orOne(c.Block.X), orOne(c.Block.Y), orOne(c.Block.Z)}
	return c
}

// Launch queues f on the current slot's stream (tf_kernel_launch) and
// returns once it is queued; faults the kernel meets show up in later
// calls.  args are the kernel's parameters in order, each a Go value of
// the parameter's C type: DevicePtr for a pointer, uint32 for an unsigned,
// float32 for a float, or a struct or array of such (anything without Go
// pointers; int and uint are refused, their size is not C's int).  A
// *Buffer[T] is passed as its Ptr; once the kernel is queued, Launch
// records the use of each Buffer made through another Queue than r
// (RecordUse), so that its Free waits for the kernel on the device (an
// error of that record comes back with the kernel queued).  It takes no
// slot lock, so it may be called from StreamEnqueue and CublasEnqueue
// callbacks.
func (r *Runtime) Launch(f *Function, config LaunchConfig, args ...interface{}) error {
	const op = "tf_kernel_launch"
	if f == nil {
		return bindingError(StatusInvalidArgument, op, "the Function is nil")
	}
	params, operands, err := kernelParams(op, args)
	if err != nil {
		return err
	}
	cfg := config.withOnes()
	err = useBoth(op, r.handle(), f.module.handle(), func(p, _ unsafe.Pointer) error {
		return kernelLaunch(p, f.ptr, &cfg, params)
	})
	if err != nil {
		return err
	}
	return r.recordUses(operands)
}

// paramLayout is where each kernel argument goes in one block of bytes
// (C's layout: each value at its alignment), which the C side copies into
// C memory: cuLaunchKernel reads an array of pointers to the values, which
// cgo forbids in Go memory.
type paramLayout struct {
	values  []reflect.Value
	offsets []uintptr
	size    uintptr
}

// kernelParams lays out args, each Buffer as its address, and returns the
// Buffers among them.
func kernelParams(op string, args []interface{}) (paramLayout, []deviceOperand, error) {
	l := paramLayout{values: make([]reflect.Value, len(args)), offsets: make([]uintptr, len(args))}
	var operands []deviceOperand
	for i, a := range args {
		if o, ok := a.(deviceOperand); ok && !reflect.ValueOf(a).IsNil() {
			operands = append(operands, o)
			a, _ = o.operand()
		}
		v := reflect.ValueOf(a)
		if !v.IsValid() || !plainData(v.Type()) {
			return paramLayout{}, nil, bindingError(StatusInvalidArgument, op,
				"kernel argument %d (%T) is not a fixed-size value without Go pointers", i, a)
		}
		align := uintptr(v.Type().Align())
		l.size = (l.size + align - 1) / align * align
		l.offsets[i], l.values[i] = l.size, v
		l.size += v.Type().Size()
	}
	return l, operands, nil
}

// copyTo writes the values into block (l.size bytes) and the address of
// each into argv (one per value).
func (l paramLayout) copyTo(block unsafe.Pointer, argv []unsafe.Pointer) {
	for i, v := range l.values {
		dst := unsafe.Add(block, l.offsets[i])
		// Copy the value's bytes: an addressable copy gives their address.
		tmp := reflect.New(v.Type())
		tmp.Elem().Set(v)
		n := v.Type().Size()
		copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(tmp.UnsafePointer()), n))
		argv[i] = dst
	}
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
