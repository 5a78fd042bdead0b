package tenferro

// #include "shim.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// CompileTarget is what Compile produces (enum tf_compile_target).
type CompileTarget int32

// Compile targets.
const (
	CompilePTX   = CompileTarget(C.TF_COMPILE_PTX)   // PTX text, JIT-compiled by LoadModule
	CompileCUBIN = CompileTarget(C.TF_COMPILE_CUBIN) // a CUBIN for one architecture
)

// CompileOptions are the options of Compile (tf_compile_options); the
// zero value compiles PTX for the runtime's device.
type CompileOptions struct {
	Target  CompileTarget
	Arch    int      // 10*major + minor (90 for sm_90); 0 for the runtime's device
	Options []string // further NVRTC options: "-std=c++17", "-I/path", ...
	Name    string   // the program's name in the log; "" for "tenferro_program.cu"
}

// cCompileOptions holds a tf_compile_options and the C strings it points
// to (C memory, as the library reads an array of pointers).
type cCompileOptions struct {
	c       C.tf_compile_options
	strings []*C.char
	argv    **C.char
}

func (o *CompileOptions) toC(op string) (*cCompileOptions, error) {
	out := &cCompileOptions{}
	C.tf_compile_options_init(&out.c, C.size_t(unsafe.Sizeof(out.c)))
	if o == nil {
		return out, nil
	}
	arch, err := int32Arg(op, "arch", o.Arch)
	if err != nil {
		return nil, err
	}
	count, err := int32Arg(op, "option_count", len(o.Options))
	if err != nil {
		return nil, err
	}
	out.c.target, out.c.arch, out.c.option_count = C.int32_t(o.Target), arch, count
	if len(o.Options) > 0 {
		out.argv = (**C.char)(C.malloc(C.size_t(len(o.Options)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		argv := unsafe.Slice(out.argv, len(o.Options))
		for i, s := range o.Options {
			argv[i] = out.string(s)
		}
		out.c.options = out.argv
	}
	if o.Name != "" {
		out.c.name = out.string(o.Name)
	}
	return out, nil
}

func (o *cCompileOptions) string(s string) *C.char {
	c := C.CString(s)
	o.strings = append(o.strings, c)
	return c
}

func (o *cCompileOptions) free() {
	for _, s := range o.strings {
		C.free(unsafe.Pointer(s))
	}
	C.free(unsafe.Pointer(o.argv))
}

// Program is the result of Compile: the compiled image and NVRTC's log
// (tf_program).  It holds no runtime.
type Program struct {
	h *handle
}

func newProgram(ptr *C.tf_program) *Program {
	p := &Program{h: newHandle(unsafe.Pointer(ptr), "Program", "tf_program_release",
		func(p unsafe.Pointer) error {
			C.tf_program_release((*C.tf_program)(p))
			return nil
		})}
	runtime.SetFinalizer(p, func(p *Program) { p.h.close() })
	return p
}

// Compile compiles CUDA C++ source with NVRTC for the runtime's device (or
// opts.Arch), loading NVRTC at first use (tf_program_compile).  opts may be
// nil.  Kernels to be found by their plain name must be extern "C".
//
// When NVRTC rejects the source the error has StatusCompile and its Log
// field holds NVRTC's whole log.  Load the image with LoadModule.
func (r *Runtime) Compile(source string, opts *CompileOptions) (*Program, error) {
	const op = "tf_program_compile"
	c, err := opts.toC(op)
	if err != nil {
		return nil, err
	}
	defer c.free()
	src := C.CString(source)
	defer C.free(unsafe.Pointer(src))
	var ptr *C.tf_program
	err = r.do(op, func(p *C.tf_runtime) *C.tf_error_info { return C.go_tf_program_compile(p, src, &c.c, &ptr) })
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
func (p *Program) Image() ([]byte, error) {
	var img unsafe.Pointer
	var n C.size_t
	err := p.h.useC("tf_program_image", func(ptr unsafe.Pointer) *C.tf_error_info {
		return C.go_tf_program_image((*C.tf_program)(ptr), &img, &n)
	})
	if err != nil {
		return nil, err
	}
	return C.GoBytes(img, C.int(n)), nil
}

// Log returns NVRTC's log, "" when it wrote none (tf_program_log).
func (p *Program) Log() (string, error) {
	var log *C.char
	err := p.h.useC("tf_program_log", func(ptr unsafe.Pointer) *C.tf_error_info {
		return C.go_tf_program_log((*C.tf_program)(ptr), &log)
	})
	if err != nil {
		return "", err
	}
	return C.GoString(log), nil
}

// Close frees the program, its image and its log (tf_program_release).
func (p *Program) Close() error {
	runtime.SetFinalizer(p, nil)
	return p.h.close()
}
