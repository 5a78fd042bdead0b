// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"runtime"
	"unsafe"
)

// CompileTarget is what Compile produces (enum tf_compile_target).
type CompileTarget int32

// Compile targets.
const (
	CompilePTX   CompileTarget = 0 // PTX text, JIT-compiled by LoadModule
	CompileCUBIN CompileTarget = 1 // a CUBIN for one architecture
)

// CompileOptions are the options of Compile (tf_compile_options); the
// zero value compiles PTX for the runtime's device.
type CompileOptions struct {
	Target  CompileTarget
	Arch    int      // 10*major + minor (90 for sm_90); 0 for the runtime's device
	Options []string // further NVRTC options: "-std=c++17", "-I/path", ...
	Name    string   // the program's name in the log; "" for "tenferro_program.cu"
}

// compileValues are CompileOptions checked to fit tf_compile_options.
type compileValues struct {
	target, arch int32
	options      []string
	name         string
}

func (o *CompileOptions) check(op string) (v compileValues, err error) {
	if o == nil {
		return v, nil
	}
	if v.arch, err = int32Arg(op, "arch", o.Arch); err != nil {
		return v, err
	}
	if _, err = int32Arg(op, "option_count", len(o.Options)); err != nil {
		return v, err
	}
	v.target, v.options, v.name = int32(o.Target), o.Options, o.Name
	return v, nil
}

// Program is one reference to the result of Compile: the compiled image
// and NVRTC's log (tf_program).  It holds no runtime.  Clone adds a
// reference; the image and log stay until the last is closed (or, for one
// never closed, its finalizer runs).
type Program struct {
	h *handle
}

func newProgram(ptr unsafe.Pointer) *Program {
	p := &Program{h: newHandle(ptr, "Program", "tf_program_release_checked", programRelease)}
	runtime.SetFinalizer(p, func(p *Program) { p.h.close() })
	return p
}

// handle is p's handle, nil for a nil Program.
func (p *Program) handle() *handle {
	if p == nil {
		return nil
	}
	return p.h
}

// Compile compiles CUDA C++ source with NVRTC for the runtime's device (or
// opts.Arch), loading NVRTC at first use (tf_program_compile).  opts may be
// nil.  Kernels to be found by their plain name must be extern "C".
//
// When NVRTC rejects the source the error has StatusCompile and its Log
// field holds NVRTC's whole log.  Load the image with LoadModule.
func (r *Runtime) Compile(source string, opts *CompileOptions) (*Program, error) {
	const op = "tf_program_compile"
	v, err := opts.check(op)
	if err != nil {
		return nil, err
	}
	var ptr unsafe.Pointer
	err = r.do(op, func(p unsafe.Pointer) (err error) {
		ptr, err = programCompile(p, source, &v)
		return err
	})
	if err == nil {
		return newProgram(ptr), nil
	}
	if e, ok := err.(*Error); ok && e.Status == StatusCompile && ptr != nil {
		prog := newProgram(ptr)
		e.Log, _ = prog.Log()
		prog.Close()
	}
	return nil, err
}

// Image returns a copy of the compiled image (PTX including its NUL byte,
// or a CUBIN) for LoadModule (tf_program_image).
func (p *Program) Image() (image []byte, err error) {
	err = p.handle().use("tf_program_image", func(ptr unsafe.Pointer) error {
		image, err = programImage(ptr)
		return err
	})
	return image, err
}

// Log returns NVRTC's log, "" when it wrote none (tf_program_log).
func (p *Program) Log() (log string, err error) {
	err = p.handle().use("tf_program_log", func(ptr unsafe.Pointer) error {
		log, err = programLog(ptr)
		return err
	})
	return log, err
}

// Clone returns a new reference to the same program (tf_program_retain,
// new in 1.1: against a 1.0 library it returns StatusNotSupported and
// ErrLibraryTooOld).
func (p *Program) Clone() (*Program, error) {
	var ptr unsafe.Pointer
	err := p.handle().use("tf_program_retain", func(c unsafe.Pointer) error {
		ptr = c
		return programRetain(c)
	})
	if err != nil {
		return nil, err
	}
	return newProgram(ptr), nil
}

// Close releases this reference (tf_program_release_checked); the last one
// frees the image and the log.  It returns the library's error when the
// release is refused (StatusInvalidHandle: the program was released
// behind the package's back), and is never retried.  A second Close
// returns StatusInvalidHandle ("already closed") and releases nothing.
// Against a 1.0 library it uses tf_program_release, which reports nothing.
func (p *Program) Close() error {
	if p == nil {
		return errNotOpen("tf_program_release_checked")
	}
	runtime.SetFinalizer(p, nil)
	return p.h.close()
}
