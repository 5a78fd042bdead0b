// Package testsupport gives the binding's tests what the C suites get from
// tests/support: the thread's current CUDA context through whichever
// libcuda.so.1 the process loaded, and the driver double's control
// interface (tests/cuda_double/tfd_control.h) when that libcuda.so.1 is the
// double.  Against the real driver Double returns nil and tests that need
// fault injection skip.
package testsupport

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static void *ts_driver(void) { return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); }
static void *ts_sym(void *lib, const char *name) { return lib ? dlsym(lib, name) : NULL; }

// A real driver entry point through cuGetProcAddress_v2 (the driver
// exports few of its functions by their plain names).
static void *ts_entry(void *lib, const char *name, int version) {
    typedef int (*gpa_fn)(const char *, void **, int, uint64_t, void *);
    gpa_fn gpa = (gpa_fn)ts_sym(lib, "cuGetProcAddress_v2");
    void *fn = NULL;
    if (gpa == NULL || gpa(name, &fn, version, 1, NULL) != 0) return NULL;
    return fn;
}
static int ts_ctx_get_current(void *fn, void **out) { return ((int (*)(void **))fn)(out); }
static int ts_ctx_set_current(void *fn, void *ctx) { return ((int (*)(void *))fn)(ctx); }
static void *ts_ptr(void *fn) { return ((void *(*)(void))fn)(); }
static void ts_void(void *fn) { ((void (*)(void))fn)(); }
static void ts_fail(void *fn, const char *entry, unsigned long nth, int code, unsigned long times) {
    ((void (*)(const char *, unsigned long, int, unsigned long))fn)(entry, nth, code, times);
}
static unsigned long ts_calls(void *fn, const char *entry) {
    return ((unsigned long (*)(const char *))fn)(entry);
}
static long ts_live(void *fn, int kind) { return ((long (*)(int))fn)(kind); }
static int ts_int_of_int(void *fn, int v) { return ((int (*)(int))fn)(v); }
static void *ts_ptr_of_int(void *fn, int v) { return ((void *(*)(int))fn)(v); }
static void ts_void_of_ptr(void *fn, void *p) { ((void (*)(void *))fn)(p); }
*/
import "C"

import (
	"sync"
	"unsafe"
)

var (
	once   sync.Once
	driver unsafe.Pointer
)

func lib() unsafe.Pointer {
	once.Do(func() { driver = C.ts_driver() })
	return driver
}

func sym(name string) unsafe.Pointer {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.ts_sym(lib(), cname)
}

// CurrentContext is the calling OS thread's current CUcontext: the
// double's record of it, or cuCtxGetCurrent of the real driver.  Lock the
// goroutine to its thread around calls whose results are compared.
func CurrentContext() unsafe.Pointer {
	if fn := sym("tfd_current_context"); fn != nil {
		return C.ts_ptr(fn)
	}
	var ctx unsafe.Pointer
	if fn := entry("cuCtxGetCurrent"); fn != nil {
		C.ts_ctx_get_current(fn, &ctx)
	}
	return ctx
}

// SetCurrentContext makes ctx (or nil) current on the calling OS thread
// without going through the library.
func SetCurrentContext(ctx unsafe.Pointer) {
	if fn := sym("tfd_set_current"); fn != nil {
		C.ts_void_of_ptr(fn, ctx)
	} else if fn := entry("cuCtxSetCurrent"); fn != nil {
		C.ts_ctx_set_current(fn, ctx)
	}
}

// entry resolves a driver entry point of API version 4000 (both context
// functions are that old).
func entry(name string) unsafe.Pointer {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.ts_entry(lib(), cname, 4000)
}

// Double is the driver double's control interface.
type Double struct{}

// Kinds of live objects the double counts (enum tfd_kind).
const (
	Streams        = 0
	Events         = 1
	DeviceAllocs   = 2
	CublasHandles  = 5
	NonPrimaryCtxs = 7
)

// CUresult values the tests inject.
const (
	CudaErrorUnknown       = 999
	CudaErrorLaunchTimeout = 702
)

// GetDouble returns the control interface, or nil when the loaded
// libcuda.so.1 is not the double.  Load the driver first (any tenferro
// call that reaches it, e.g. DeviceCount).
func GetDouble() *Double {
	if sym("tfd_reset") == nil {
		return nil
	}
	return &Double{}
}

func (*Double) call(name string) unsafe.Pointer {
	fn := sym(name)
	if fn == nil {
		panic("driver double lacks " + name)
	}
	return fn
}

// Reset forgets faults, counters and the call log (tfd_reset).
func (d *Double) Reset() { C.ts_void(d.call("tfd_reset")) }

// Fail makes calls nth .. nth+times-1 of entry return code (tfd_fail).
func (d *Double) Fail(entry string, nth uint64, code int, times uint64) {
	centry := C.CString(entry)
	defer C.free(unsafe.Pointer(centry))
	C.ts_fail(d.call("tfd_fail"), centry, C.ulong(nth), C.int(code), C.ulong(times))
}

// Calls counts calls of entry since the last reset (tfd_calls).
func (d *Double) Calls(entry string) uint64 {
	centry := C.CString(entry)
	defer C.free(unsafe.Pointer(centry))
	return uint64(C.ts_calls(d.call("tfd_calls"), centry))
}

// Live counts live objects of a kind (tfd_live).
func (d *Double) Live(kind int) int64 { return int64(C.ts_live(d.call("tfd_live"), C.int(kind))) }

// PrimaryRefcount is the retain count of a device's primary context.
func (d *Double) PrimaryRefcount(device int) int {
	return int(C.ts_int_of_int(d.call("tfd_primary_refcount"), C.int(device)))
}

// CreateContext makes a non-primary context on device, not current.
func (d *Double) CreateContext(device int) unsafe.Pointer {
	return C.ts_ptr_of_int(d.call("tfd_create_context"), C.int(device))
}

// DestroyContext destroys a context made by CreateContext.
func (d *Double) DestroyContext(ctx unsafe.Pointer) {
	C.ts_void_of_ptr(d.call("tfd_destroy_context"), ctx)
}
