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
// pool (tf_host_alloc): the host side of DownloadAsync and UploadAsync.  It
// is C memory, which the garbage collector neither moves nor frees.  Not
// zeroed.  Its methods may be called from any goroutine, concurrently.
//
// Read and write it inside With (or WithHostSlice): the block cannot go
// back to the pool while fn runs, since a Close made meanwhile (by fn
// itself, or another goroutine) is carried out when the last With returns.
// UnsafeBytes and UnsafeHostSlice are the raw view, for the asynchronous
// copies and for code that keeps the HostBuffer open itself: a slice of it
// used after Close reads and writes whatever block the pool hands out next,
// or memory HostTrim gave back to the driver (a fault), and Go cannot tell.
//
// Close (or Free) gives the block back to the pool.  It is safe while an
// asynchronous copy still uses the block (the pool hands it out again only
// once the device is done), and after a failed synchronous copy (see
// Close).  A HostBuffer dropped without Close is never reused: its memory
// stays allocated until the process exits (no finalizer frees it, because
// the raw views do not keep the HostBuffer reachable).  The block holds a
// reference to its runtime, released by Close.
type HostBuffer struct {
	rt    *Runtime // the reference the block holds (a Clone of the allocating one)
	track hostRange
	block unsafe.Pointer
	n     int
	scope viewScope
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
	h := &HostBuffer{rt: owner, block: ptr, n: bytes}
	h.track.track(ptr, bytes)
	return h, nil
}

// open: made by HostAlloc and not closed.
func (h *HostBuffer) open() bool { return h != nil && h.rt != nil && !h.scope.isClosed() }

// Ptr is the block's address (nil once closed).
func (h *HostBuffer) Ptr() unsafe.Pointer {
	if !h.open() {
		return nil
	}
	return h.block
}

// Len is the number of bytes asked for (the pool holds its size class), 0
// once closed.
func (h *HostBuffer) Len() int {
	if !h.open() {
		return 0
	}
	return h.n
}

// With runs fn with the block as a slice, which stays valid until fn
// returns and must not be kept after it: a Close made meanwhile is carried
// out when the last With returns.  Once the HostBuffer is closed it
// returns an error with StatusInvalidHandle and does not run fn;
// otherwise nil, or the error of a Close that it carried out.
func (h *HostBuffer) With(fn func(b []byte)) error {
	if h == nil || h.rt == nil {
		return errNotOpen("HostBuffer.With")
	}
	return h.scope.lend("HostBuffer.With", "HostBuffer", h.block, h.n, fn, h.release)
}

// WithHostSlice is With that views the block as Len/sizeof(T) values of T
// (blocks are page-aligned; an empty slice when Len < sizeof(T)).
func WithHostSlice[T Scalar](h *HostBuffer, fn func(values []T)) error {
	return h.With(func(b []byte) { fn(bytesAs[T](b)) })
}

// UnsafeBytes is the block as a slice (nil once closed), valid until Close
// and unchecked: after it, the slice aliases whatever the pool hands out
// next, or memory given back to the driver.  Prefer With.
func (h *HostBuffer) UnsafeBytes() []byte {
	if !h.open() {
		return nil
	}
	return unsafe.Slice((*byte)(h.block), h.n)
}

// UnsafeHostSlice is UnsafeBytes as Len/sizeof(T) values of T (nil once
// closed or when Len < sizeof(T)), valid until Close and unchecked.
// Prefer WithHostSlice.
func UnsafeHostSlice[T Scalar](h *HostBuffer) []T { return bytesAs[T](h.UnsafeBytes()) }

// Bytes is UnsafeBytes.
//
// Deprecated: the slice outlives Close unchecked; use With, or UnsafeBytes
// where the raw view is needed.
func (h *HostBuffer) Bytes() []byte { return h.UnsafeBytes() }

// HostSlice is UnsafeHostSlice.
//
// Deprecated: the slice outlives Close unchecked; use WithHostSlice, or
// UnsafeHostSlice where the raw view is needed.
func HostSlice[T Scalar](h *HostBuffer) []T { return UnsafeHostSlice[T](h) }

// RecordUse notes that work you queued yourself on q's slot (a kernel, a
// StreamEnqueue callback) reads or writes the block, so that Close waits
// for it (tf_host_record_use).  The asynchronous copies of this package
// record their own uses.
func (h *HostBuffer) RecordUse(q Queue) error {
	return recordUse(q, h.Ptr(), "HostBuffer")
}

// Close gives the block back to the pool (tf_host_free) and releases the
// runtime reference it holds; a second Close does nothing.  While a With
// runs it returns nil, and the last With does it.  On an error the block
// is leaked (never reused): do not use it either way.
//
// After a synchronous Download or Upload through the block failed (with a
// status other than StatusInvalidArgument) the device may still use it:
// the binding told the pool so, on the failed call's slot, and the pool
// hands the block out again only once that stream has passed the copy.
// If even that failed (the runtime saw a device fault; the block is
// another runtime's), Close first waits for that slot as Sync does, and if
// the wait fails it leaks the block and returns an error that unwraps to
// ErrLeaked.
func (h *HostBuffer) Close() error {
	if h == nil || h.rt == nil || !h.scope.close() {
		return nil
	}
	return h.release()
}

// Free is Close.
func (h *HostBuffer) Free() error { return h.Close() }

// release gives the block back, or leaks it; the scope calls it once.
func (h *HostBuffer) release() error {
	h.track.untrack()
	defer h.rt.Close()
	if held, err := h.track.settle(); err != nil {
		h.track.drop()
		e := heldError("tf_host_free", "the block was leaked on purpose, never to be reused", held, err)
		e.cause = ErrLeaked
		return e
	}
	return h.rt.do("tf_host_free", func(p unsafe.Pointer) error { return hostFree(p, h.block) })
}

// recordUse is RecordUse of the block or range at ptr through q.
func recordUse(q Queue, ptr unsafe.Pointer, kind string) error {
	const op = "tf_host_record_use"
	if ptr == nil {
		return bindingError(StatusInvalidHandle, op, "the %s was closed", kind)
	}
	return runtimeOf(q).do(op, func(p unsafe.Pointer) error { return hostRecordUse(p, ptr) })
}

// Registration is memory of the caller's page-locked for a runtime
// (tf_host_register), so that the asynchronous copies accept it.  It holds
// a reference to the runtime until Close (or Unregister), or until a
// finalizer unregisters a Registration dropped without it.  Its methods
// may be called from any goroutine.
type Registration struct {
	mu    sync.Mutex
	rt    *Runtime
	ptr   unsafe.Pointer // nil once unregistered
	n     int
	track *hostRange
}

// HostRegister page-locks the bytes at ptr for the runtime
// (tf_host_register) until the Registration is closed.
// StatusInvalidArgument for a nil ptr, 0 bytes, a range overlapping one
// the runtime tracks, or memory already page-locked.
//
// The memory must be memory Go does not manage: from MapHostMemory,
// syscall.Mmap, or C (C.malloc, a C library's buffer).  The library keeps
// the address after the call returns and the device reads and writes the
// memory while copies run, which cgo's pointer rules forbid for Go memory
// (make, new, a Go variable): do not pass unsafe.Pointer(&goSlice[0]).
// Keep the memory mapped until Close returns nil (MapHostMemory's Close
// refuses to unmap it before).
func (r *Runtime) HostRegister(ptr unsafe.Pointer, bytes int) (*Registration, error) {
	const op = "tf_host_register"
	n, err := sizeArg(op, "bytes", bytes)
	if err != nil {
		return nil, err
	}
	owner, err := r.Clone()
	if err != nil {
		return nil, err
	}
	// Tracked first, so that MapHostMemory's Close never unmaps memory in
	// the middle of being registered.
	track := trackHostRange(ptr, bytes)
	err = owner.do(op, func(rt unsafe.Pointer) error { return hostRegister(rt, ptr, n) })
	if err != nil {
		track.untrack()
		owner.Close()
		return nil, err
	}
	g := &Registration{rt: owner, ptr: ptr, n: bytes, track: track}
	runtime.SetFinalizer(g, (*Registration).finalize)
	return g, nil
}

// Ptr is the registered memory's address (nil once unregistered).
func (g *Registration) Ptr() unsafe.Pointer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ptr
}

// Len is the number of bytes registered (0 once unregistered).
func (g *Registration) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// Bytes is the registered memory as a slice (nil once unregistered): the
// caller's memory, valid for as long as the caller keeps it mapped.
func (g *Registration) Bytes() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ptr == nil {
		return nil
	}
	return unsafe.Slice((*byte)(g.ptr), g.n)
}

// RecordUse is HostBuffer.RecordUse for the registered range.
func (g *Registration) RecordUse(q Queue) error {
	return recordUse(q, g.Ptr(), "Registration")
}

// Close waits for the streams that used the range, then unregisters it
// (tf_host_unregister) and releases the runtime reference; a second Close
// does nothing.  On an error the range stays registered: call again, or
// leave it to the runtime's last release; the memory must stay mapped.
//
// After a synchronous Download or Upload through the range failed (other
// than StatusInvalidArgument), the binding told the runtime, on the
// failed call's slot, that the range is in use there, so the wait covers
// that stream; if even that failed, Close first waits for that slot (as
// Sync does).
func (g *Registration) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ptr == nil {
		return nil
	}
	if held, err := g.track.settle(); err != nil {
		return heldError("tf_host_unregister", "the range stays registered", held, err)
	}
	p := g.ptr
	if err := g.rt.do("tf_host_unregister", func(rt unsafe.Pointer) error { return hostUnregister(rt, p) }); err != nil {
		return err
	}
	g.track.untrack()
	g.rt.Close()
	g.ptr, g.n, g.rt = nil, 0, nil
	runtime.SetFinalizer(g, nil)
	return nil
}

// Unregister is Close.
func (g *Registration) Unregister() error { return g.Close() }

// leakedRegistrations keeps the memory of ranges a finalizer could not
// unregister: the device may still use it.
var leakedRegistrations struct {
	sync.Mutex
	list []*Registration
}

func (g *Registration) finalize() {
	if g.Close() != nil {
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
