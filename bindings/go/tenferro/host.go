// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"errors"
	"runtime"
	"sync"
	"unsafe"
)

// Page-locked host memory and asynchronous copies (tf_host_alloc ..
// tf_upload_async, new in 1.1; docs/transfers.md, "Page-locked host
// memory" and "Asynchronous copies").
//
// Against a 1.0 library these calls return an *Error with
// StatusNotSupported that unwraps to ErrLibraryTooOld and names the
// function; everything else works.

// ErrLibraryTooOld is what a call returns, wrapped in an *Error with
// StatusNotSupported, when the loaded library is an older 1.x that lacks
// the C function it needs (the message names it and the version that
// added it).  The program runs on; only that call is refused.
var ErrLibraryTooOld = errors.New("tenferro: the loaded library is older than this function")

// HostBuffer is a block of page-locked host memory from a runtime's caching
// pool (tf_host_alloc): the host side of DownloadAsync and UploadAsync.
// It is C memory, which the garbage collector neither moves nor frees; its
// Bytes (or HostSlice) view is an ordinary Go slice over it.  Not zeroed.
//
// Call Free to give the block back to the pool.  Free is safe while an
// asynchronous copy still uses the block (the pool hands it out again only
// once the device is done), but the views must not be used after it.  A
// HostBuffer dropped without Free is never reused: its memory stays
// allocated until the process exits (no finalizer frees it, because the
// slices taken of it do not keep the HostBuffer reachable).  The block
// holds a reference to its runtime, released by Free.  Free must not race
// with the other methods.
type HostBuffer struct {
	rt  *Runtime // the reference the block holds (a Clone of the allocating one)
	ptr unsafe.Pointer
	n   int
}

// HostAlloc allocates bytes (at least 1) of page-locked host memory from
// the runtime's pool (tf_host_alloc): the size is rounded up to a size
// class, and a cached block of the class is reused without a driver call.
// StatusOutOfMemory when page-locked memory is exhausted.
func (r *Runtime) HostAlloc(bytes int) (*HostBuffer, error) {
	const op = "tf_host_alloc"
	n, err := sizeArg(op, "bytes", bytes)
	if err != nil {
		return nil, err
	}
	owner, err := r.Clone()
	if err != nil {
		return nil, err
	}
	var ptr unsafe.Pointer
	err = owner.do(op, func(p unsafe.Pointer) (err error) {
		ptr, err = hostAlloc(p, n)
		return err
	})
	if err != nil {
		owner.Close()
		return nil, err
	}
	return &HostBuffer{rt: owner, ptr: ptr, n: bytes}, nil
}

// Ptr is the block's address (nil once freed).
func (h *HostBuffer) Ptr() unsafe.Pointer { return h.ptr }

// Len is the number of bytes asked for (the pool holds its size class).
func (h *HostBuffer) Len() int { return h.n }

// Bytes is the block as a slice (nil once freed).  It is valid until Free.
func (h *HostBuffer) Bytes() []byte {
	if h.ptr == nil {
		return nil
	}
	return unsafe.Slice((*byte)(h.ptr), h.n)
}

// HostSlice views the block as Len/sizeof(T) values of T (nil once freed),
// valid until Free.  Blocks are page-aligned.
func HostSlice[T Scalar](h *HostBuffer) []T {
	var zero T
	if h == nil || h.ptr == nil || h.n < int(unsafe.Sizeof(zero)) {
		return nil
	}
	return unsafe.Slice((*T)(h.ptr), h.n/int(unsafe.Sizeof(zero)))
}

// RecordUse notes that work you queued yourself on q's slot (a kernel, a
// StreamEnqueue callback) reads or writes the block, so that Free waits
// for it (tf_host_record_use).  The asynchronous copies of this package
// record their own uses.
func (h *HostBuffer) RecordUse(q Queue) error {
	return recordUse(q, h.ptr, "HostBuffer")
}

// Free gives the block back to the pool (tf_host_free) and releases the
// runtime reference it holds; a second Free does nothing.  On an error the
// block is leaked (never reused): do not use it either way.
func (h *HostBuffer) Free() error {
	if h.ptr == nil {
		return nil
	}
	ptr, owner := h.ptr, h.rt
	h.ptr, h.n, h.rt = nil, 0, nil
	err := owner.do("tf_host_free", func(p unsafe.Pointer) error { return hostFree(p, ptr) })
	owner.Close()
	return err
}

// recordUse is RecordUse of the block or range at ptr through q.
func recordUse(q Queue, ptr unsafe.Pointer, kind string) error {
	const op = "tf_host_record_use"
	if ptr == nil {
		return bindingError(StatusInvalidHandle, op, "the %s was freed", kind)
	}
	return runtimeOf(q).do(op, func(p unsafe.Pointer) error { return hostRecordUse(p, ptr) })
}

// Registration is memory of the caller's page-locked for a runtime
// (tf_host_register), so that the asynchronous copies accept it.  It keeps
// the slice (and a reference to the runtime) until Unregister, or until a
// finalizer unregisters a Registration dropped without it.
type Registration struct {
	mu  sync.Mutex
	rt  *Runtime
	mem []byte
}

// HostRegister page-locks mem for the runtime (tf_host_register) until
// Unregister.  StatusInvalidArgument for an empty slice, one overlapping a
// range the runtime tracks, or memory already page-locked.
//
// Register memory that Go does not manage: syscall.Mmap's, or C memory.
// The library keeps the address after the call returns and the device
// reads and writes it while copies run, which cgo's rules forbid for Go
// memory (make, new): the garbage collector does not move heap objects
// today, and the Registration keeps mem reachable until it is
// unregistered, but nothing in Go promises either.  Do not unmap or free
// the memory before Unregister returns.
func (r *Runtime) HostRegister(mem []byte) (*Registration, error) {
	const op = "tf_host_register"
	owner, err := r.Clone()
	if err != nil {
		return nil, err
	}
	p, n := sliceBytes(mem)
	err = owner.do(op, func(rt unsafe.Pointer) error { return hostRegister(rt, p, n) })
	if err != nil {
		owner.Close()
		return nil, err
	}
	g := &Registration{rt: owner, mem: mem}
	runtime.SetFinalizer(g, (*Registration).finalize)
	return g, nil
}

// Bytes is the registered memory (nil once unregistered).
func (g *Registration) Bytes() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mem
}

// RecordUse is HostBuffer.RecordUse for the registered range.
func (g *Registration) RecordUse(q Queue) error {
	p, _ := sliceBytes(g.Bytes())
	return recordUse(q, p, "Registration")
}

// Unregister waits for the streams that used the range, then unregisters
// it (tf_host_unregister) and releases the slice and the runtime
// reference; a second Unregister does nothing.  On an error the range stays
// registered: call again, or leave it to the runtime's last release.
func (g *Registration) Unregister() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mem == nil {
		return nil
	}
	p, _ := sliceBytes(g.mem)
	if err := g.rt.do("tf_host_unregister", func(rt unsafe.Pointer) error { return hostUnregister(rt, p) }); err != nil {
		return err
	}
	g.rt.Close()
	g.mem, g.rt = nil, nil
	runtime.SetFinalizer(g, nil)
	return nil
}

// leakedRegistrations keeps the memory of ranges a finalizer could not
// unregister: the device may still use it.
var leakedRegistrations struct {
	sync.Mutex
	list []*Registration
}

func (g *Registration) finalize() {
	if g.Unregister() != nil {
		leakedRegistrations.Lock()
		leakedRegistrations.list = append(leakedRegistrations.list, g)
		leakedRegistrations.Unlock()
	}
}

// HostPoolStats is a consistent snapshot of a runtime's page-locked memory
// counters (tf_host_pool_stats).  Bytes are size classes, what the driver
// holds: BytesInUse+BytesCached is what the pool holds from the driver;
// PendingFrees <= BlocksCached.
type HostPoolStats struct {
	BytesInUse        uint64 // blocks allocated and not freed
	BytesCached       uint64 // freed blocks kept for reuse
	BytesRegistered   uint64 // HostRegister ranges
	BlocksInUse       uint64
	BlocksCached      uint64 // pending frees included
	DriverAllocations uint64 // cuMemHostAlloc calls that succeeded
	PendingFrees      uint64 // freed blocks a stream may still use
}

// HostStats returns the runtime's HostPoolStats (tf_host_stats).
func (r *Runtime) HostStats() (s HostPoolStats, err error) {
	err = r.do("tf_host_stats", func(p unsafe.Pointer) error {
		s, err = hostStats(p)
		return err
	})
	return s, err
}

// HostTrim gives every cached block that no stream still uses back to the
// driver (tf_host_trim).
func (r *Runtime) HostTrim() error { return r.do("tf_host_trim", hostTrim) }

// DownloadAsync queues a copy of len(dst) elements of device memory at src
// into dst, after the work queued on q's stream slot, and returns at once
// with an Event recorded after the copy (tf_download_async, then
// tf_event_record).  dst must lie wholly inside one HostBuffer or
// Registration of q's runtime (a sub-slice is fine); other memory is
// StatusInvalidArgument, never a silent synchronous copy.  dst belongs to
// the device until the Event is done (Wait, WaitContext, Done): do not
// read or write it before.  Close the Event when done with it (or leave it
// to the garbage collector).  An error from tf_event_record means the copy
// was queued but cannot be observed: Sync the Stream before touching dst.
func DownloadAsync[T Scalar](q Queue, dst []T, src DevicePtr) (*Event, error) {
	p, n := sliceBytes(dst)
	return queueAsync(runtimeOf(q), "tf_download_async", func(rt unsafe.Pointer) error {
		return downloadAsync(rt, src, p, n)
	})
}

// UploadAsync queues a copy of src to device memory at dst, after the work
// queued on q's stream slot, and returns at once with an Event recorded
// after the copy (tf_upload_async, then tf_event_record).  src must lie
// inside one HostBuffer or Registration of q's runtime, as for
// DownloadAsync; the device reads it when the copy runs, so keep it
// unchanged until the Event is done.
func UploadAsync[T Scalar](q Queue, dst DevicePtr, src []T) (*Event, error) {
	p, n := sliceBytes(src)
	return queueAsync(runtimeOf(q), "tf_upload_async", func(rt unsafe.Pointer) error {
		return uploadAsync(rt, p, dst, n)
	})
}

// queueAsync makes the Event first (so that its failure leaves nothing
// queued), queues the copy, then records the Event after it.
func queueAsync(r *Runtime, op string, call func(rt unsafe.Pointer) error) (*Event, error) {
	e, err := r.NewEvent()
	if err != nil {
		return nil, err
	}
	if err := r.do(op, call); err != nil {
		e.Close()
		return nil, err
	}
	if err := r.RecordEvent(e); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// DownloadAsync is DownloadAsync of the first len(dst) elements (at most
// Len) of the buffer, through its Queue.
func (b *Buffer[T]) DownloadAsync(dst []T) (*Event, error) {
	if len(dst) > b.n {
		return nil, bindingError(StatusInvalidArgument, "tf_download_async", "%d elements are more than the buffer's %d", len(dst), b.n)
	}
	return DownloadAsync(b.rt, dst, b.ptr)
}

// UploadAsync is UploadAsync of src (at most Len elements) to the start of
// the buffer, through its Queue.
func (b *Buffer[T]) UploadAsync(src []T) (*Event, error) {
	if len(src) > b.n {
		return nil, bindingError(StatusInvalidArgument, "tf_upload_async", "%d elements do not fit a buffer of %d", len(src), b.n)
	}
	return UploadAsync(b.rt, b.ptr, src)
}
