// SPDX-License-Identifier: MIT OR Apache-2.0
// Package testsupport gives the binding's tests what the C suites get from
// tests/support: the thread's current CUDA context and a context of the
// test's own, through whichever libcuda.so.1 the process loaded, and the
// driver double's control interface (tests/cuda_double/tfd_control.h) when
// that libcuda.so.1 is the double.
//
// Against the real driver every context function goes to the driver itself
// (cuCtxGetCurrent, cuCtxSetCurrent, cuCtxCreate, cuCtxDestroy resolved
// with cuGetProcAddress_v2 from the loaded libcuda.so.1, as the library
// resolves its own), GetDouble returns nil and tests that need fault
// injection skip.  Nothing here silently answers nil: a context function
// that cannot reach a driver panics with the reason, so a broken setup
// fails loudly instead of passing comparisons of nil with nil.
package testsupport

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

// RTLD_NOLOAD first: the libcuda.so.1 the library already loaded, whatever
// folder it came from; else load it the way the library does.
static void *ts_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    return h ? h : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
}
static void *ts_sym(void *lib, const char *name) { return lib ? dlsym(lib, name) : NULL; }

// A real driver entry point through cuGetProcAddress_v2 (the driver
// exports few of its functions by their plain names).  *result is the
// CUresult, or -1 when the driver has no cuGetProcAddress_v2.
static void *ts_entry(void *lib, const char *name, int version, int *result) {
    typedef int (*gpa_fn)(const char *, void **, int, uint64_t, int *);
    gpa_fn gpa = (gpa_fn)ts_sym(lib, "cuGetProcAddress_v2");
    void *fn = NULL;
    int found = 0;
    *result = -1;
    if (gpa == NULL) return NULL;
    // flags 1: CU_GET_PROC_ADDRESS_LEGACY_STREAM, as the library asks.
    *result = gpa(name, &fn, version, 1, &found);
    return *result == 0 ? fn : NULL;
}
static int ts_ctx_get_current(void *fn, void **out) { return ((int (*)(void **))fn)(out); }
static int ts_ctx_set_current(void *fn, void *ctx) { return ((int (*)(void *))fn)(ctx); }
static int ts_init(void *fn) { return ((int (*)(unsigned))fn)(0); }
static int ts_device_get(void *fn, int *dev, int ordinal) { return ((int (*)(int *, int))fn)(dev, ordinal); }
// cuCtxCreate_v4(CUcontext *, CUctxCreateParams *, unsigned flags, CUdevice)
static int ts_ctx_create(void *fn, void **ctx, int dev) {
    return ((int (*)(void **, void *, unsigned, int))fn)(ctx, NULL, 0, dev);
}
static int ts_ctx_destroy(void *fn, void *ctx) { return ((int (*)(void *))fn)(ctx); }
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
static void ts_void_of_int(void *fn, int v) { ((void (*)(int))fn)(v); }
static void ts_void_of_3int(void *fn, int a, int b, int c) { ((void (*)(int, int, int))fn)(a, b, c); }
static int ts_device_rw(void *fn, uint64_t dptr, void *host, size_t n) {
    return ((int (*)(uint64_t, void *, size_t))fn)(dptr, host, n);
}
static void ts_void_of_ulong(void *fn, unsigned long v) { ((void (*)(unsigned long))fn)(v); }
static unsigned long ts_ulong_of_ptr(void *fn, void *p) { return ((unsigned long (*)(void *))fn)(p); }
static unsigned long ts_step(void *fn, void *stream, unsigned long n) {
    return ((unsigned long (*)(void *, unsigned long))fn)(stream, n);
}

// A gate: a host function queued on a stream that keeps the stream from
// going past it until the test opens it (at most 60 s, so that a test that
// fails before opening it cannot hang the process).
static void ts_gate_wait(void *flag) {
    for (int i = 0; i < 600000 && !__atomic_load_n((int *)flag, __ATOMIC_ACQUIRE); i++) usleep(100);
}
static int *ts_gate_new(void) { return calloc(1, sizeof(int)); }
static void ts_gate_open(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }
// cuLaunchHostFunc(CUstream, CUhostFn, void *)
static int ts_gate_launch(void *fn, void *stream, int *flag) {
    return ((int (*)(void *, void (*)(void *), void *))fn)(stream, ts_gate_wait, flag);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

var (
	once   sync.Once
	driver unsafe.Pointer
)

// lib is the loaded libcuda.so.1 (nil if none can be loaded).  Load the
// driver through the library first (any call that reaches it, e.g.
// tenferro.DeviceCount), so that this is the very driver it uses.
func lib() unsafe.Pointer {
	once.Do(func() { driver = C.ts_driver() })
	return driver
}

func sym(name string) unsafe.Pointer {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.ts_sym(lib(), cname)
}

// isDouble: the loaded libcuda.so.1 exports the double's controls.
func isDouble() bool { return sym("tfd_reset") != nil }

// realEntry resolves a real driver entry point, or explains why not.
type realEntry struct {
	name    string
	version int
	once    sync.Once
	fn      unsafe.Pointer
	err     error
}

func (e *realEntry) get() unsafe.Pointer {
	e.once.Do(func() {
		if lib() == nil {
			e.err = fmt.Errorf("no libcuda.so.1 could be loaded")
			return
		}
		cname := C.CString(e.name)
		defer C.free(unsafe.Pointer(cname))
		var result C.int
		e.fn = C.ts_entry(lib(), cname, C.int(e.version), &result)
		if e.fn == nil {
			e.err = fmt.Errorf("cuGetProcAddress_v2(%q, version %d) of the loaded libcuda.so.1 answered %d",
				e.name, e.version, int(result))
		}
	})
	if e.err != nil {
		panic("testsupport: " + e.err.Error())
	}
	return e.fn
}

var (
	cuCtxGetCurrent = realEntry{name: "cuCtxGetCurrent", version: 4000}
	cuCtxSetCurrent = realEntry{name: "cuCtxSetCurrent", version: 4000}
	cuInit          = realEntry{name: "cuInit", version: 2000}
	cuDeviceGet     = realEntry{name: "cuDeviceGet", version: 2000}
	cuCtxCreate     = realEntry{name: "cuCtxCreate", version: 12050}
	cuCtxDestroy    = realEntry{name: "cuCtxDestroy", version: 4000}
	cuLaunchHost    = realEntry{name: "cuLaunchHostFunc", version: 10000}
)

// Gate holds back a stream: work queued on it after the gate waits until
// Open, on a GPU as on the double.  Queue it with the primary context
// current (from inside StreamEnqueue, with the stream it gives).
type Gate struct{ flag *C.int }

// NewGate makes a closed gate.  Its flag is never freed: the host
// function may read it until the stream passes it.
func NewGate() *Gate { return &Gate{flag: C.ts_gate_new()} }

// Enqueue queues the gate on stream (cuLaunchHostFunc) and returns the
// CUresult.
func (g *Gate) Enqueue(stream unsafe.Pointer) int {
	return int(C.ts_gate_launch(cuLaunchHost.get(), stream, g.flag))
}

// Open lets the stream go on; opening twice is harmless.
func (g *Gate) Open() { C.ts_gate_open(g.flag) }

// Check says whether CurrentContext and SetCurrentContext work in this
// process: nil with the double or with a real driver whose entry points
// resolve (CreateContext needs cuCtxCreate_v4 of a CUDA 12.5 driver too,
// and panics with the reason where it is missing).
func Check() (err error) {
	if isDouble() {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	cuCtxGetCurrent.get()
	cuCtxSetCurrent.get()
	return nil
}

func check(what string, result C.int) {
	if result != 0 {
		panic(fmt.Sprintf("testsupport: %s failed: CUresult %d", what, int(result)))
	}
}

// CurrentContext is the calling OS thread's current CUcontext: the
// double's record of it, or cuCtxGetCurrent of the real driver.  Lock the
// goroutine to its thread around calls whose results are compared.
func CurrentContext() unsafe.Pointer {
	if fn := sym("tfd_current_context"); fn != nil {
		return C.ts_ptr(fn)
	}
	var ctx unsafe.Pointer
	check("cuCtxGetCurrent", C.ts_ctx_get_current(cuCtxGetCurrent.get(), &ctx))
	return ctx
}

// SetCurrentContext makes ctx (or nil) current on the calling OS thread
// without going through the library.
func SetCurrentContext(ctx unsafe.Pointer) {
	if fn := sym("tfd_set_current"); fn != nil {
		C.ts_void_of_ptr(fn, ctx)
		return
	}
	check("cuCtxSetCurrent", C.ts_ctx_set_current(cuCtxSetCurrent.get(), ctx))
}

// CreateContext makes a context of the test's own on device, not current:
// the double's tfd_create_context, or cuCtxCreate of the real driver (with
// the thread's current context restored afterwards).
func CreateContext(device int) unsafe.Pointer {
	if fn := sym("tfd_create_context"); fn != nil {
		return C.ts_ptr_of_int(fn, C.int(device))
	}
	check("cuInit", C.ts_init(cuInit.get()))
	var dev C.int
	check("cuDeviceGet", C.ts_device_get(cuDeviceGet.get(), &dev, C.int(device)))
	before := CurrentContext()
	var ctx unsafe.Pointer
	check("cuCtxCreate", C.ts_ctx_create(cuCtxCreate.get(), &ctx, dev))
	SetCurrentContext(before) // cuCtxCreate made it current
	return ctx
}

// DestroyContext destroys a context made by CreateContext.
func DestroyContext(ctx unsafe.Pointer) {
	if fn := sym("tfd_destroy_context"); fn != nil {
		C.ts_void_of_ptr(fn, ctx)
		return
	}
	check("cuCtxDestroy", C.ts_ctx_destroy(cuCtxDestroy.get(), ctx))
}

// Double is the driver double's control interface.
type Double struct{}

// Kinds of live objects the double counts (enum tfd_kind).
const (
	Streams        = 0
	Events         = 1
	DeviceAllocs   = 2
	HostAllocs     = 3
	Modules        = 4
	CublasHandles  = 5
	NvrtcPrograms  = 6
	NonPrimaryCtxs = 7
	Graphs         = 8 // CUgraph: cuStreamEndCapture
	GraphExecs     = 9 // CUgraphExec: cuGraphInstantiateWithFlags
)

// CUresult and cublasStatus_t values the tests inject.
const (
	CudaErrorInvalidValue  = 1
	CudaErrorOutOfMemory   = 2
	CudaErrorNotFound      = 500
	CudaErrorIllegalAddr   = 700
	CudaErrorLaunchTimeout = 702
	CudaErrorUnknown       = 999
	CublasExecutionFailed  = 13
)

// GetDouble returns the control interface, or nil when the loaded
// libcuda.so.1 is not the double.  Load the driver first (any tenferro
// call that reaches it, e.g. DeviceCount).
func GetDouble() *Double {
	if !isDouble() {
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

// Fail makes calls nth .. nth+times-1 of entry return code (tfd_fail);
// entry may be a cuBLAS or NVRTC name too.
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

// SetAsyncPending: with on, events recorded from now on report not ready
// until their stream or event is synchronized (tfd_set_async_pending).
func (d *Double) SetAsyncPending(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.ts_void_of_int(d.call("tfd_set_async_pending"), C.int(v))
}

// CompleteAll completes every pending event (tfd_complete_all).
func (d *Double) CompleteAll() { C.ts_void(d.call("tfd_complete_all")) }

// Execution modes of the double (enum tfd_execution).
const (
	ExecSync       = 0
	ExecDeferred   = 1
	ExecBackground = 2
)

// CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, for SetAttribute.
const AttributeMemoryPoolsSupported = 115

// SetAttribute makes cuDeviceGetAttribute answer value for attribute on
// device (-1: every device) (tfd_set_attribute); Reset forgets it.
func (d *Double) SetAttribute(device, attribute, value int) {
	C.ts_void_of_3int(d.call("tfd_set_attribute"), C.int(device), C.int(attribute), C.int(value))
}

// SetExecution switches the double's execution mode (tfd_set_execution);
// Reset restores ExecDeferred.
func (d *Double) SetExecution(mode int) { C.ts_void_of_int(d.call("tfd_set_execution"), C.int(mode)) }

// SetBackgroundDelay sets how old an op must be before ExecBackground's
// thread runs it (tfd_set_background_delay_us).
func (d *Double) SetBackgroundDelay(microseconds uint64) {
	C.ts_void_of_ulong(d.call("tfd_set_background_delay_us"), C.ulong(microseconds))
}

// SetQueryProgress makes each cuEventQuery / cuStreamQuery first run up to
// ops queued ops (tfd_set_query_progress); Reset restores 0.
func (d *Double) SetQueryProgress(ops uint64) {
	C.ts_void_of_ulong(d.call("tfd_set_query_progress"), C.ulong(ops))
}

// CaptureNodes counts the nodes the open capture of stream holds, 0 when
// it captures nothing (tfd_capture_nodes).
func (d *Double) CaptureNodes(stream unsafe.Pointer) uint64 {
	return uint64(C.ts_ulong_of_ptr(d.call("tfd_capture_nodes"), stream))
}

// Pending counts the ops queued on stream and not run yet (tfd_pending).
func (d *Double) Pending(stream unsafe.Pointer) uint64 {
	return uint64(C.ts_ulong_of_ptr(d.call("tfd_pending"), stream))
}

// Step runs up to ops queued ops of stream (tfd_step) and returns how many ran.
func (d *Double) Step(stream unsafe.Pointer, ops uint64) uint64 {
	return uint64(C.ts_step(d.call("tfd_step"), stream, C.ulong(ops)))
}

// DrainAll runs every queued op of every stream (tfd_drain_all).
func (d *Double) DrainAll() { C.ts_void(d.call("tfd_drain_all")) }

// DeviceWrite writes device memory directly (tfd_device_write); false if
// the range is not inside one live allocation.
func (d *Double) DeviceWrite(dptr uint64, src []byte) bool {
	return C.ts_device_rw(d.call("tfd_device_write"), C.uint64_t(dptr), unsafe.Pointer(&src[0]), C.size_t(len(src))) == 0
}

// DeviceRead reads device memory directly (tfd_device_read).
func (d *Double) DeviceRead(dptr uint64, dst []byte) bool {
	return C.ts_device_rw(d.call("tfd_device_read"), C.uint64_t(dptr), unsafe.Pointer(&dst[0]), C.size_t(len(dst))) == 0
}

// CMalloc is n bytes of C memory, which Go does not manage: what
// HostRegister takes from a C library.  Page-aligned (aligned_alloc), so
// that no other allocation shares its pages with the driver's
// registration.  Free it with CFree.
func CMalloc(n int) unsafe.Pointer {
	return C.aligned_alloc(4096, C.size_t((n+4095)/4096*4096))
}

// CFree frees what CMalloc returned.
func CFree(p unsafe.Pointer) { C.free(p) }
