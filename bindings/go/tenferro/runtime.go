package tenferro

// #include "shim.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// Runtime is one reference to a tenferro-gpu runtime: a retained primary
// context of one device and its stream slots.  Its methods may be called
// from any goroutine, concurrently, and Close may race with them safely.
//
// Close releases the reference.  A Runtime that becomes unreachable without
// Close is released by a finalizer, but teardown synchronizes the runtime's
// streams, so call Close to choose when that wait happens.
type Runtime struct {
	h *handle
}

// Options of NewRuntimeWithOptions (tf_runtime_options).  Start from
// DefaultOptions.
type Options struct {
	StreamSlots          int    // 1 .. MaxStreamSlots
	CublasWorkspaceBytes uint64 // per slot; 0 runs cuBLAS without a workspace
	RetirementCapacity   int    // 1 .. MaxRetirementCapacity
	// Host threads copying a bulk Download into pageable memory, the
	// calling one included: 1 .. MaxDownloadThreads; 0 picks the library's
	// default (DefaultDownloadThreads, or fewer on a machine with fewer CPUs).
	DownloadThreads int
	// Bytes of each of a slot's two page-locked download staging buffers: a
	// multiple of 4096 in MinDownloadChunkBytes .. MaxDownloadChunkBytes; 0
	// picks DefaultDownloadChunkBytes.
	DownloadChunkBytes int
}

// Limits and defaults of Options, from the header.
const (
	MaxStreamSlots            = int(C.TF_MAX_STREAM_SLOTS)
	MaxRetirementCapacity     = int(C.TF_MAX_RETIREMENT_CAPACITY)
	DefaultDownloadThreads    = int(C.TF_DEFAULT_DOWNLOAD_THREADS)
	MaxDownloadThreads        = int(C.TF_MAX_DOWNLOAD_THREADS)
	DefaultDownloadChunkBytes = int(C.TF_DEFAULT_DOWNLOAD_CHUNK_BYTES)
	MinDownloadChunkBytes     = int(C.TF_MIN_DOWNLOAD_CHUNK_BYTES)
	MaxDownloadChunkBytes     = int(C.TF_MAX_DOWNLOAD_CHUNK_BYTES)
)

// DefaultOptions returns the library's defaults (tf_runtime_options_init).
func DefaultOptions() Options {
	var o C.tf_runtime_options
	C.tf_runtime_options_init(&o, C.size_t(unsafe.Sizeof(o)))
	return Options{
		StreamSlots:          int(o.stream_slots),
		CublasWorkspaceBytes: uint64(o.cublas_workspace_bytes),
		RetirementCapacity:   int(o.retirement_capacity),
		DownloadThreads:      int(o.download_threads),
		DownloadChunkBytes:   int(o.download_chunk_bytes),
	}
}

// toC fills a tf_runtime_options of this package's size.  The library
// reads no more than struct_size bytes, so a newer library with a grown
// struct keeps working (and an older one refuses fields it does not know
// only when they are nonzero).
func (o Options) toC(op string) (C.tf_runtime_options, error) {
	var c C.tf_runtime_options
	C.tf_runtime_options_init(&c, C.size_t(unsafe.Sizeof(c)))
	for _, f := range []struct {
		dst  *C.uint32_t
		name string
		v    int
	}{
		{&c.stream_slots, "stream_slots", o.StreamSlots},
		{&c.retirement_capacity, "retirement_capacity", o.RetirementCapacity},
		{&c.download_threads, "download_threads", o.DownloadThreads},
		{&c.download_chunk_bytes, "download_chunk_bytes", o.DownloadChunkBytes},
	} {
		v, err := uint32Arg(op, f.name, f.v)
		if err != nil {
			return c, err
		}
		*f.dst = v
	}
	c.cublas_workspace_bytes = C.uint64_t(o.CublasWorkspaceBytes)
	return c, nil
}

// newRuntime wraps a reference the caller owns; the finalizer releases it
// unless Close did.
func newRuntime(ptr *C.tf_runtime) *Runtime {
	r := &Runtime{h: newHandle(unsafe.Pointer(ptr), "Runtime", "tf_runtime_release",
		dropWith(func(p unsafe.Pointer) *C.tf_error_info { return C.go_tf_runtime_release((*C.tf_runtime)(p)) }))}
	runtime.SetFinalizer(r, (*Runtime).finalize)
	return r
}

func (r *Runtime) finalize() {
	r.h.close() // nothing to report to: teardown problems go to the log
}

// NewRuntime creates a runtime on device `ordinal` with default options
// (tf_runtime_new).
func NewRuntime(ordinal int) (*Runtime, error) {
	o, err := int32Arg("tf_runtime_new", "ordinal", ordinal)
	if err != nil {
		return nil, err
	}
	var ptr *C.tf_runtime
	if err := takeError(C.go_tf_runtime_new(o, &ptr)); err != nil {
		return nil, err
	}
	return newRuntime(ptr), nil
}

// NewRuntimeWithOptions creates a runtime on device `ordinal`
// (tf_runtime_new_with_options).
func NewRuntimeWithOptions(ordinal int, options Options) (*Runtime, error) {
	const op = "tf_runtime_new_with_options"
	o, err := int32Arg(op, "ordinal", ordinal)
	if err != nil {
		return nil, err
	}
	c, err := options.toC(op)
	if err != nil {
		return nil, err
	}
	var ptr *C.tf_runtime
	if err := takeError(C.go_tf_runtime_new_with_options(o, &c, &ptr)); err != nil {
		return nil, err
	}
	return newRuntime(ptr), nil
}

// Close releases this reference (tf_runtime_release).  The last reference
// to a runtime tears it down on the calling goroutine's thread: it waits for
// the runtime's streams, then frees what the runtime made.  If a call on
// this Runtime is still running on another goroutine, the release happens
// when that call returns.  Calling Close again returns an error with
// StatusInvalidHandle; it never releases twice.
func (r *Runtime) Close() error {
	err := r.h.close()
	runtime.SetFinalizer(r, nil)
	return err
}

// do runs one shim wrapper with the runtime's C pointer held for the
// duration of the call (see handle).
func (r *Runtime) do(op string, call func(*C.tf_runtime) *C.tf_error_info) error {
	return r.h.useC(op, func(p unsafe.Pointer) *C.tf_error_info { return call((*C.tf_runtime)(p)) })
}

// Clone returns a new reference to the same runtime (tf_runtime_retain):
// same identity and state, closed independently.
func (r *Runtime) Clone() (*Runtime, error) {
	var ptr *C.tf_runtime
	err := r.do("tf_runtime_retain", func(p *C.tf_runtime) *C.tf_error_info {
		ptr = p
		return C.go_tf_runtime_retain(p)
	})
	if err != nil {
		return nil, err
	}
	return newRuntime(ptr), nil
}

// BindSlot returns a reference to the same runtime whose calls always use
// stream slot `slot`, from whatever OS thread the goroutine runs on
// (tf_runtime_bind_slot).  Use it to give a goroutine a stable stream.
// Binding a bound Runtime rebinds to `slot`.
func (r *Runtime) BindSlot(slot int) (*Runtime, error) {
	const op = "tf_runtime_bind_slot"
	s, err := int32Arg(op, "slot", slot)
	if err != nil {
		return nil, err
	}
	var bound *C.tf_runtime
	err = r.do(op, func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_bind_slot(p, s, &bound)
	})
	if err != nil {
		return nil, err
	}
	return newRuntime(bound), nil
}

// Identity is a number fresh for every NewRuntime and equal for every
// Clone and BindSlot of it (tf_runtime_identity).
func (r *Runtime) Identity() (uint64, error) {
	var v C.uint64_t
	err := r.do("tf_runtime_identity", func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_identity(p, &v)
	})
	return uint64(v), err
}

// AllocationDomain is the domain device memory made through this runtime
// belongs to (tf_runtime_allocation_domain).
func (r *Runtime) AllocationDomain() (uint64, error) {
	var v C.uint64_t
	err := r.do("tf_runtime_allocation_domain", func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_allocation_domain(p, &v)
	})
	return uint64(v), err
}

// Device describes the runtime's device as read when it was created
// (tf_runtime_device_info).
func (r *Runtime) Device() (DeviceProperties, error) {
	var d C.tf_device_properties
	C.tf_device_properties_init(&d, C.size_t(unsafe.Sizeof(d)))
	err := r.do("tf_runtime_device_info", func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_device_info(p, &d)
	})
	if err != nil {
		return DeviceProperties{}, err
	}
	return devicePropertiesFromC(&d), nil
}

// Capability is a feature Runtime.Supports answers for (enum tf_capability).
type Capability int32

// Every capability the header defines.
const (
	CapNativeModules      = Capability(C.TF_CAP_NATIVE_MODULES)
	CapRuntimeCompilation = Capability(C.TF_CAP_RUNTIME_COMPILATION)
	CapRawStream          = Capability(C.TF_CAP_RAW_STREAM)
	CapSameDeviceCopy     = Capability(C.TF_CAP_SAME_DEVICE_COPY)
	CapPeerCopy           = Capability(C.TF_CAP_PEER_COPY)
	CapCUBLAS             = Capability(C.TF_CAP_CUBLAS)
	CapStreamOrderedAlloc = Capability(C.TF_CAP_STREAM_ORDERED_ALLOC)
)

// Supports reports whether the runtime supports c (tf_runtime_supports); a
// capability the library does not know is answered with false.
func (r *Runtime) Supports(c Capability) (bool, error) {
	var v C.int32_t
	err := r.do("tf_runtime_supports", func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_supports(p, C.int32_t(c), &v)
	})
	return v != 0, err
}

// PrimaryContext returns the device's primary context (a CUcontext) that
// the runtime retains (tf_runtime_primary_context).  It stays valid while
// the runtime lives.  Prefer WithContext to making it current yourself.
func (r *Runtime) PrimaryContext() (unsafe.Pointer, error) {
	var v unsafe.Pointer
	err := r.do("tf_runtime_primary_context", func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_primary_context(p, &v)
	})
	return v, err
}

// SlotCount returns the number of stream slots (tf_runtime_slot_count).
func (r *Runtime) SlotCount() (int, error) {
	var v C.int32_t
	err := r.do("tf_runtime_slot_count", func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_slot_count(p, &v)
	})
	return int(v), err
}

// CurrentSlot returns the stream slot a call made now would use
// (tf_runtime_current_slot): the bound slot of a BindSlot Runtime, else the
// slot of the OS thread the goroutine happens to run on, which can change
// at the next call.
func (r *Runtime) CurrentSlot() (int, error) {
	var v C.int32_t
	err := r.do("tf_runtime_current_slot", func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_current_slot(p, &v)
	})
	return int(v), err
}

// Stream returns the current slot's CUstream, created on first use
// (tf_runtime_stream).  Without BindSlot the slot follows the OS thread, so
// two calls from one goroutine may return different streams.
func (r *Runtime) Stream() (unsafe.Pointer, error) {
	var v unsafe.Pointer
	err := r.do("tf_runtime_stream", func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_stream(p, &v)
	})
	return v, err
}

// SlotStream returns the CUstream of slot `slot`, created on first use
// (tf_runtime_slot_stream).
func (r *Runtime) SlotStream(slot int) (unsafe.Pointer, error) {
	const op = "tf_runtime_slot_stream"
	s, err := int32Arg(op, "slot", slot)
	if err != nil {
		return nil, err
	}
	var v unsafe.Pointer
	err = r.do(op, func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_slot_stream(p, s, &v)
	})
	return v, err
}

// Sync waits for the work queued on the current slot's stream, then runs
// the workspace retirements the device has passed (tf_runtime_sync).  Use a
// BindSlot Runtime to wait for the slot the goroutine's work went to.
func (r *Runtime) Sync() error {
	return r.do("tf_runtime_sync", func(p *C.tf_runtime) *C.tf_error_info {
		return C.go_tf_runtime_sync(p)
	})
}
