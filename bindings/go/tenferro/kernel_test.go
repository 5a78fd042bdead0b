// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// Real CUDA C++ for the GPU; the double knows the kernel's name
// (tfd_add_f32) and runs the same addition on host memory.
const addSource = `extern "C" __global__ void tfd_add_f32(const float *x, const float *y, float *out,
                                         unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
`

// compileAdd compiles addSource and loads it through rt.
func compileAdd(t *testing.T, rt *tenferro.Runtime) (*tenferro.Module, *tenferro.Function) {
	t.Helper()
	requireCapability(t, rt, tenferro.CapRuntimeCompilation, "NVRTC")
	prog, err := rt.Compile(addSource, &tenferro.CompileOptions{Name: "add.cu", Options: []string{"-default-device"}})
	must(t, err)
	defer prog.Close()
	image, err := prog.Image()
	must(t, err)
	if !strings.Contains(string(image), "tfd_add_f32") {
		t.Fatalf("the PTX names no tfd_add_f32: %.200q", image)
	}
	m, err := rt.LoadModule(image)
	must(t, err)
	f, err := m.Function("tfd_add_f32")
	must(t, err)
	return m, f
}

// launchAdd runs out = x + y for n elements through f on rt and checks it.
func launchAdd(t *testing.T, rt *tenferro.Runtime, f *tenferro.Function, n int, seed int64) {
	t.Helper()
	xs, ys := randomFloats(seed, n), randomFloats(seed+1, n)
	x, err := tenferro.BufferFrom(rt, xs)
	must(t, err)
	defer x.Free()
	y, err := tenferro.BufferFrom(rt, ys)
	must(t, err)
	defer y.Free()
	out, err := tenferro.NewBuffer[float32](rt, n)
	must(t, err)
	defer out.Free()
	must(t, rt.Launch(f, tenferro.Blocks1D(n, 256), x.Ptr(), y.Ptr(), out.Ptr(), uint32(n)))
	got, err := out.ToSlice()
	must(t, err)
	for i := range got {
		if got[i] != xs[i]+ys[i] {
			t.Fatalf("out[%d] = %v, want %v", i, got[i], xs[i]+ys[i])
		}
	}
}

// An NVRTC-compiled kernel launched from Go computes what the CPU does.
func TestCompiledKernelRuns(t *testing.T) {
	rt := newRuntime(t, 2)
	defer closeRuntime(t, rt)
	worker := bind(t, rt, 1)
	m, f := compileAdd(t, worker.Runtime)
	launchAdd(t, worker.Runtime, f, 1000, 11)
	launchAdd(t, worker.Runtime, f, 1, 12)
	must(t, f.SetAttribute(tenferro.FuncMaxDynamicSharedSizeBytes, 1024))
	// A launch from inside a stream callback (it takes no slot lock); n = 0
	// touches no memory.
	must(t, worker.StreamEnqueue(func(unsafe.Pointer) error {
		return worker.Launch(f, tenferro.LaunchConfig{}, tenferro.DevicePtr(0), tenferro.DevicePtr(0),
			tenferro.DevicePtr(0), uint32(0))
	}))
	// A Function belongs to its Module value: closing that one refuses its
	// Functions, while a clone's Functions keep working.
	clone, err := m.Clone()
	must(t, err)
	must(t, m.Close())
	asError(t, worker.Launch(f, tenferro.Blocks1D(1, 1), tenferro.DevicePtr(0), tenferro.DevicePtr(0),
		tenferro.DevicePtr(0), uint32(0)), tenferro.StatusInvalidHandle, "tf_kernel_launch", "Module was closed")
	g, err := clone.Function("tfd_add_f32")
	must(t, err)
	launchAdd(t, worker.Runtime, g, 300, 13)
	must(t, clone.Close())
}

func TestKernelErrors(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	requireCapability(t, rt, tenferro.CapRuntimeCompilation, "NVRTC")
	// NVRTC's log comes with the compile error.
	_, err := rt.Compile("extern \"C\" __global__ void k() {}\n#error broken on purpose\n", nil)
	e := asError(t, err, tenferro.StatusCompile, "tf_program_compile")
	if e.Domain != tenferro.CodeNVRTC || !strings.Contains(e.Log, "broken on purpose") {
		t.Fatalf("compile error %+v", e)
	}
	_, err = rt.Compile(addSource, &tenferro.CompileOptions{Arch: -1})
	asError(t, err, tenferro.StatusInvalidArgument, "tf_program_compile", "must not be negative")
	m, f := compileAdd(t, rt)
	defer m.Close()
	_, err = m.Function("no_such_kernel")
	e = asError(t, err, tenferro.StatusCUDA, "tf_module_function", "no kernel 'no_such_kernel'")
	if e.Call != "cuModuleGetFunction" {
		t.Fatalf("missing kernel: %+v", e)
	}
	asError(t, rt.Launch(f, tenferro.Blocks1D(1, 1), 1, 2), tenferro.StatusInvalidArgument,
		"tf_kernel_launch", "kernel argument 0 (int) is not a fixed-size value")
	asError(t, rt.Launch(f, tenferro.Blocks1D(1, 1), &struct{}{}), tenferro.StatusInvalidArgument,
		"tf_kernel_launch", "kernel argument 0 (*struct {})")
	asError(t, rt.Launch(nil, tenferro.LaunchConfig{}), tenferro.StatusInvalidArgument, "tf_kernel_launch", "nil")
	_, err = rt.LoadModule(nil)
	asError(t, err, tenferro.StatusInvalidArgument, "tf_module_load")
}

// A Program's clones share its image and log; each is closed on its own,
// from any goroutine, and a second Close of one is an error.
func TestProgramClonesShareTheImage(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	requireCapability(t, rt, tenferro.CapRuntimeCompilation, "NVRTC")
	prog, err := rt.Compile(addSource, &tenferro.CompileOptions{Name: "add.cu"})
	must(t, err)
	image, err := prog.Image()
	must(t, err)
	clones := make([]*tenferro.Program, 4)
	for i := range clones {
		clones[i], err = prog.Clone()
		must(t, err)
	}
	must(t, prog.Close())
	asError(t, prog.Close(), tenferro.StatusInvalidHandle, "tf_program_release_checked", "Program was already closed")
	_, err = prog.Clone()
	asError(t, err, tenferro.StatusInvalidHandle, "tf_program_retain", "Program was closed")
	errs := make(chan error, len(clones))
	for _, c := range clones {
		go func(c *tenferro.Program) {
			got, err := c.Image()
			if err == nil && string(got) != string(image) {
				err = fmt.Errorf("a clone's image differs: %.80q", got)
			}
			if err == nil {
				err = c.Close()
			}
			errs <- err
		}(c)
	}
	for range clones {
		must(t, <-errs)
	}
}
