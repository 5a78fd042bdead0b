// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"runtime"
	"unsafe"
)

// Runtime is one reference to a tenferro-gpu runtime: a retained primary
// context of one device and its stream slots.  Its methods may be called
// from any goroutine, concurrently, and Close may race with them safely.
//
// The methods that queue or wait for work (transfers, Sync, Launch,
// CublasEnqueue, RecordEvent, ...) use a stream slot.  Called on a Runtime
// from NewRuntime or Clone they use the slot of the OS thread the goroutine
// happens to run on, which Go may change between any two calls: give each
// goroutine a Stream (NewStream) instead, whose calls always use its slot.
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
	// Bytes of each of a slot's three page-locked staging buffers: a
	// multiple of 4096 in MinDownloadChunkBytes .. MaxDownloadChunkBytes; 0
	// picks DefaultDownloadChunkBytes.
	DownloadChunkBytes int
	// Unused device memory, in bytes, the device's memory pool keeps when
	// a synchronizing call finds it holding more; 0 picks
	// DefaultMemoryReleaseThreshold, which keeps all until TrimMemory or an
	// out-of-memory retry; 1 keeps none.  The pool is the device's: a
	// nonzero value must equal that of the pool a live runtime of the
	// device made (else StatusInvalidArgument).  Needs a 1.2 library.
	MemoryReleaseThreshold uint64
	// Most device memory, in bytes, the device's pool may hold from the
	// driver; an allocation that needs more is retried once the pool gave
	// its cached memory back, then fails with StatusOutOfMemory.  0: no
	// limit; otherwise at least MinMemoryReservedLimit and, as above, that
	// of the device's pool.  Needs a driver of CUDA 12.2 or later
	// (StatusNotSupported) and a 1.2 library.
	MemoryReservedLimit uint64
}

// Limits and defaults of Options, from the header this package was written
// for (the cgo build's tests compare them with the header it is built with).
const (
	MaxStreamSlots            = 256
	MaxRetirementCapacity     = 1048576
	DefaultDownloadThreads    = 12
	MaxDownloadThreads        = 64
	DefaultDownloadChunkBytes = 8 << 20
	MinDownloadChunkBytes     = 64 << 10
	MaxDownloadChunkBytes     = 256 << 20
	MinMemoryReservedLimit    = 32 << 20 // the chunk a pool reserves at a time (H200)

	// DefaultMemoryReleaseThreshold is what MemoryReleaseThreshold 0
	// selects: the pool keeps all unused memory.
	DefaultMemoryReleaseThreshold uint64 = 1<<64 - 1

	defaultStreamSlots          = 8
	defaultCublasWorkspaceBytes = 32 << 20
	defaultRetirementCapacity   = 1024
)

// DefaultOptions returns the library's defaults (tf_runtime_options_init),
// or the header's when the library is not available.
func DefaultOptions() Options {
	if o, ok := libraryDefaultOptions(); ok {
		return o
	}
	return Options{
		StreamSlots:          defaultStreamSlots,
		CublasWorkspaceBytes: defaultCublasWorkspaceBytes,
		RetirementCapacity:   defaultRetirementCapacity,
	}
}

// optionValues are Options checked to fit tf_runtime_options' fields.
type optionValues struct {
	slots, retirement, threads, chunk          uint32
	workspace, releaseThreshold, reservedLimit uint64
}

// check converts the fields for the C struct.  The library reads no more
// than struct_size bytes, so a newer library with a grown struct keeps
// working (and an older one refuses fields it does not know only when they
// are nonzero).
func (o Options) check(op string) (v optionValues, err error) {
	for _, f := range []struct {
		dst  *uint32
		name string
		v    int
	}{
		{&v.slots, "stream_slots", o.StreamSlots},
		{&v.retirement, "retirement_capacity", o.RetirementCapacity},
		{&v.threads, "download_threads", o.DownloadThreads},
		{&v.chunk, "download_chunk_bytes", o.DownloadChunkBytes},
	} {
		if *f.dst, err = uint32Arg(op, f.name, f.v); err != nil {
			return v, err
		}
	}
	v.workspace = o.CublasWorkspaceBytes
	v.releaseThreshold, v.reservedLimit = o.MemoryReleaseThreshold, o.MemoryReservedLimit
	return v, nil
}

// newRuntime wraps a reference the caller owns; the finalizer releases it
// unless Close did.
func newRuntime(ptr unsafe.Pointer) *Runtime {
	r := &Runtime{h: newHandle(ptr, "Runtime", "tf_runtime_release", runtimeRelease)}
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
	ptr, err := runtimeNew(o, nil)
	if err != nil {
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
	v, err := options.check(op)
	if err != nil {
		return nil, err
	}
	ptr, err := runtimeNew(o, &v)
	if err != nil {
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
	err := r.handle().close()
	runtime.SetFinalizer(r, nil)
	return err
}

// handle is r's handle, nil for a nil or zero Runtime (whose calls then
// fail with StatusInvalidHandle).
func (r *Runtime) handle() *handle {
	if r == nil {
		return nil
	}
	return r.h
}

// do runs one call with the runtime's C pointer held for its duration
// (see handle).
func (r *Runtime) do(op string, call func(rt unsafe.Pointer) error) error {
	return r.handle().use(op, call)
}

// Clone returns a new reference to the same runtime (tf_runtime_retain):
// same identity and state, closed independently.
func (r *Runtime) Clone() (*Runtime, error) {
	var ptr unsafe.Pointer
	err := r.do("tf_runtime_retain", func(p unsafe.Pointer) error {
		ptr = p
		return runtimeRetain(p)
	})
	if err != nil {
		return nil, err
	}
	return newRuntime(ptr), nil
}

// BindSlot returns a reference to the same runtime whose calls always use
// stream slot `slot`, from whatever OS thread the goroutine runs on
// (tf_runtime_bind_slot).  NewStream returns the same kind of reference as
// a Stream, which is what the rest of this package's documentation uses.
// Binding a bound Runtime rebinds to `slot`.
func (r *Runtime) BindSlot(slot int) (*Runtime, error) {
	const op = "tf_runtime_bind_slot"
	s, err := int32Arg(op, "slot", slot)
	if err != nil {
		return nil, err
	}
	var bound unsafe.Pointer
	err = r.do(op, func(p unsafe.Pointer) (err error) {
		bound, err = runtimeBindSlot(p, s)
		return err
	})
	if err != nil {
		return nil, err
	}
	return newRuntime(bound), nil
}

// Identity is a number fresh for every NewRuntime and equal for every
// Clone, BindSlot and NewStream of it (tf_runtime_identity).
func (r *Runtime) Identity() (v uint64, err error) {
	err = r.do("tf_runtime_identity", func(p unsafe.Pointer) error {
		v, err = runtimeIdentity(p)
		return err
	})
	return v, err
}

// AllocationDomain is the domain device memory made through this runtime
// belongs to (tf_runtime_allocation_domain).
func (r *Runtime) AllocationDomain() (v uint64, err error) {
	err = r.do("tf_runtime_allocation_domain", func(p unsafe.Pointer) error {
		v, err = runtimeAllocationDomain(p)
		return err
	})
	return v, err
}

// Device describes the runtime's device as read when it was created
// (tf_runtime_device_info).
func (r *Runtime) Device() (d DeviceProperties, err error) {
	err = r.do("tf_runtime_device_info", func(p unsafe.Pointer) error {
		d, err = runtimeDeviceInfo(p)
		return err
	})
	return d, err
}

// Capability is a feature Runtime.Supports answers for (enum tf_capability).
type Capability int32

// Every capability the header defines.
const (
	CapNativeModules      Capability = 1
	CapRuntimeCompilation Capability = 2
	CapRawStream          Capability = 3
	CapSameDeviceCopy     Capability = 4
	CapPeerCopy           Capability = 5
	CapCUBLAS             Capability = 6
	CapStreamOrderedAlloc Capability = 7
)

// Supports reports whether the runtime supports c (tf_runtime_supports); a
// capability the library does not know is answered with false.
func (r *Runtime) Supports(c Capability) (ok bool, err error) {
	err = r.do("tf_runtime_supports", func(p unsafe.Pointer) error {
		ok, err = runtimeSupports(p, int32(c))
		return err
	})
	return ok, err
}

// PrimaryContext returns the device's primary context (a CUcontext) that
// the runtime retains (tf_runtime_primary_context).  It stays valid while
// the runtime lives.  Prefer WithContext to making it current yourself.
func (r *Runtime) PrimaryContext() (v unsafe.Pointer, err error) {
	err = r.do("tf_runtime_primary_context", func(p unsafe.Pointer) error {
		v, err = runtimePrimaryContext(p)
		return err
	})
	return v, err
}

// SlotCount returns the number of stream slots (tf_runtime_slot_count).
func (r *Runtime) SlotCount() (int, error) {
	var v int32
	err := r.do("tf_runtime_slot_count", func(p unsafe.Pointer) (err error) {
		v, err = runtimeSlotCount(p)
		return err
	})
	return int(v), err
}

// CurrentSlot returns the stream slot a call made now would use
// (tf_runtime_current_slot): the bound slot of a Stream or BindSlot
// Runtime, else the slot of the OS thread the goroutine happens to run on,
// which can change at the next call.
func (r *Runtime) CurrentSlot() (int, error) {
	var v int32
	err := r.do("tf_runtime_current_slot", func(p unsafe.Pointer) (err error) {
		v, err = runtimeCurrentSlot(p)
		return err
	})
	return int(v), err
}

// Stream returns the current slot's CUstream, created on first use
// (tf_runtime_stream).  Without a Stream or BindSlot the slot follows the
// OS thread, so two calls from one goroutine may return different streams.
func (r *Runtime) Stream() (v unsafe.Pointer, err error) {
	err = r.do("tf_runtime_stream", func(p unsafe.Pointer) error {
		v, err = runtimeStream(p)
		return err
	})
	return v, err
}

// SlotStream returns the CUstream of slot `slot`, created on first use
// (tf_runtime_slot_stream).
func (r *Runtime) SlotStream(slot int) (v unsafe.Pointer, err error) {
	const op = "tf_runtime_slot_stream"
	s, err := int32Arg(op, "slot", slot)
	if err != nil {
		return nil, err
	}
	err = r.do(op, func(p unsafe.Pointer) error {
		v, err = runtimeSlotStream(p, s)
		return err
	})
	return v, err
}

// Sync waits for the work queued on the current slot's stream, then runs
// the workspace retirements the device has passed (tf_runtime_sync).  Call
// it on a Stream to wait for the slot the goroutine's work went to;
// SyncContext stops waiting when a context is done.
func (r *Runtime) Sync() error {
	return r.do("tf_runtime_sync", runtimeSync)
}
