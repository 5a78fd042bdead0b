// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"fmt"
	"unsafe"
)

// DevicePtr is an address of device memory (a CUdeviceptr).  It is a plain
// number: the garbage collector neither sees nor frees device memory.
type DevicePtr uint64

// Add returns p advanced by bytes.
func (p DevicePtr) Add(bytes int) DevicePtr { return p + DevicePtr(bytes) }

// String prints the address in hexadecimal, as the library's messages do.
func (p DevicePtr) String() string { return fmt.Sprintf("0x%x", uint64(p)) }

// MaxScalarDownload is the most bytes DownloadScalar reads
// (TF_SCALAR_DOWNLOAD_MAX_BYTES): a complex128.
const MaxScalarDownload = 16

// Scalar is an element type whose slices cross to the device as raw bytes:
// fixed-size numbers without Go pointers.
type Scalar interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// sliceBytes is the address and byte length of s's elements (nil for an
// empty slice, which the library accepts with length 0).
func sliceBytes[T Scalar](s []T) (unsafe.Pointer, uintptr) {
	if len(s) == 0 {
		return nil, 0
	}
	var zero T
	return unsafe.Pointer(&s[0]), uintptr(len(s)) * unsafe.Sizeof(zero)
}

// Alloc allocates bytes of device memory on the runtime's device, in order
// on the current slot's stream (tf_alloc): from the device's memory pool
// where it has one (usable at once by later work on the same slot, by other
// slots and the host after Sync on this slot), else a plain cuMemAlloc.
// bytes 0 gives address 0 and no allocation.  Release it with Free.
func (r *Runtime) Alloc(bytes int) (DevicePtr, error) {
	const op = "tf_alloc"
	n, err := sizeArg(op, "bytes", bytes)
	if err != nil {
		return 0, err
	}
	var p DevicePtr
	err = r.do(op, func(rt unsafe.Pointer) (err error) {
		p, err = deviceAlloc(rt, n)
		return err
	})
	return p, err
}

// Free releases memory Alloc returned, in order on the current slot's
// stream (tf_free): work queued earlier on this slot may still use it; work
// on other slots that uses it must be finished first.  Address 0 is a no-op.
func (r *Runtime) Free(p DevicePtr) error {
	return r.do("tf_free", func(rt unsafe.Pointer) error { return deviceFree(rt, p) })
}

// Upload copies src to device memory at dst, in order on q's stream slot
// (tf_upload).  src may be reused as soon as Upload returns; later work on
// the same slot sees the data, other slots after Sync.  After an error
// (other than StatusInvalidArgument) the device may still read a src that
// lies in a HostBuffer or Registration: their Free and Unregister wait for
// it (HostBuffer.Free).  Go memory is never touched after Upload returns.
func Upload[T Scalar](q Queue, dst DevicePtr, src []T) error {
	p, n := sliceBytes(src)
	return runtimeOf(q).do("tf_upload", func(rt unsafe.Pointer) error {
		f, err := upload(rt, p, dst, n)
		return afterCopy(rt, "tf_upload", f, p, err)
	})
}

// Download copies len(dst) elements of device memory at src into dst,
// after the work queued on q's stream slot (tf_download).  Go slices are
// ordinary (pageable) memory, which the library copies through its
// pipelined page-locked staging.  After an error dst may be partly
// written.  Go memory is never touched after Download returns; a dst in a
// HostBuffer or Registration may still be written by the device after an
// error other than StatusInvalidArgument, and their Free and Unregister
// wait for that (HostBuffer.Free).  DownloadContext stops waiting for the
// queued work when a context is done.
func Download[T Scalar](q Queue, dst []T, src DevicePtr) error {
	p, n := sliceBytes(dst)
	return runtimeOf(q).do("tf_download", func(rt unsafe.Pointer) error {
		f, err := download(rt, src, p, n)
		return afterCopy(rt, "tf_download", f, p, err)
	})
}

// DownloadScalar reads one value (at most MaxScalarDownload bytes: a
// result, a flag) from device memory at src after the work queued on q's
// stream slot, through the slot's page-locked staging buffer
// (tf_download_scalar).  It costs one small copy and one stream wait.
func DownloadScalar[T Scalar](q Queue, src DevicePtr) (T, error) {
	var v T
	err := runtimeOf(q).do("tf_download_scalar", func(rt unsafe.Pointer) error {
		return downloadScalar(rt, src, unsafe.Pointer(&v), unsafe.Sizeof(v))
	})
	return v, err
}

// Copy copies bytes of device memory from src to dst, both of the
// runtime's device, in order on the current slot's stream (tf_copy); the
// ranges must not overlap.  It returns once the copy is queued.
func (r *Runtime) Copy(dst, src DevicePtr, bytes int) error {
	const op = "tf_copy"
	n, err := sizeArg(op, "bytes", bytes)
	if err != nil {
		return err
	}
	return r.do(op, func(rt unsafe.Pointer) error { return deviceCopy(rt, src, dst, n) })
}

// doPair runs one call with both runtimes' C pointers held.
func (r *Runtime) doPair(op string, other Queue, call func(a, b unsafe.Pointer) error) error {
	o := runtimeOf(other)
	if o == nil {
		return bindingError(StatusInvalidArgument, op, "the other Runtime is nil")
	}
	return useBoth(op, r.handle(), o.handle(), call)
}

// PeerCopyAvailable reports whether copies from this runtime's device to
// dst's run directly, device to device (tf_peer_copy_available); always
// true on one device.  PeerCopy works either way.
func (r *Runtime) PeerCopyAvailable(dst Queue) (bool, error) {
	var ok bool
	err := r.doPair("tf_peer_copy_available", dst, func(a, b unsafe.Pointer) (err error) {
		ok, err = peerCopyAvailable(a, b)
		return err
	})
	return ok, err
}

// PeerCopy copies bytes from src, memory of this runtime's device, to
// dstPtr, memory of dst's device, in order on this runtime's current slot
// stream (tf_peer_copy).  dst's streams do not wait for it: Sync this
// runtime from the same slot before work on dst uses the data.
func (r *Runtime) PeerCopy(dst Queue, dstPtr, src DevicePtr, bytes int) error {
	const op = "tf_peer_copy"
	n, err := sizeArg(op, "bytes", bytes)
	if err != nil {
		return err
	}
	return r.doPair(op, dst, func(a, b unsafe.Pointer) error { return peerCopy(a, src, b, dstPtr, n) })
}

// Buffer is a typed span of device memory allocated through a Queue (a
// Stream, or a Runtime), whose transfers go through that Queue: make it
// through the goroutine's Stream to order them with its other work.
//
// Device memory is not garbage collected: call Free.  A Buffer dropped
// without Free leaks its memory until the runtime's primary context goes
// away; freeing it from a finalizer could free memory that work queued on
// another stream slot still uses.
type Buffer[T Scalar] struct {
	rt  *Runtime
	ptr DevicePtr
	n   int
}

// NewBuffer allocates n elements of T through q (uninitialized).
func NewBuffer[T Scalar](q Queue, n int) (*Buffer[T], error) {
	r := runtimeOf(q)
	var zero T
	if n < 0 || uint64(n) > ^uint64(0)/uint64(unsafe.Sizeof(zero)) {
		return nil, bindingError(StatusInvalidArgument, "tf_alloc", "%d elements of %d bytes do not fit size_t", n, unsafe.Sizeof(zero))
	}
	p, err := r.Alloc(n * int(unsafe.Sizeof(zero)))
	if err != nil {
		return nil, err
	}
	return &Buffer[T]{rt: r, ptr: p, n: n}, nil
}

// BufferFrom allocates a Buffer of len(src) elements through q and uploads
// src into it.  On an upload error the memory is freed again.
func BufferFrom[T Scalar](q Queue, src []T) (*Buffer[T], error) {
	b, err := NewBuffer[T](q, len(src))
	if err != nil {
		return nil, err
	}
	if err := b.Upload(src); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// Ptr is the buffer's device address (0 for an empty buffer).
func (b *Buffer[T]) Ptr() DevicePtr { return b.ptr }

// Len is the number of elements.
func (b *Buffer[T]) Len() int { return b.n }

// Upload copies src (at most Len elements) to the start of the buffer.
func (b *Buffer[T]) Upload(src []T) error {
	if len(src) > b.n {
		return bindingError(StatusInvalidArgument, "tf_upload", "%d elements do not fit a buffer of %d", len(src), b.n)
	}
	return Upload(b.rt, b.ptr, src)
}

// Download copies the first len(dst) elements (at most Len) into dst.
func (b *Buffer[T]) Download(dst []T) error {
	if err := b.checkDownload(dst); err != nil {
		return err
	}
	return Download(b.rt, dst, b.ptr)
}

func (b *Buffer[T]) checkDownload(dst []T) error {
	if len(dst) > b.n {
		return bindingError(StatusInvalidArgument, "tf_download", "%d elements are more than the buffer's %d", len(dst), b.n)
	}
	return nil
}

// ToSlice downloads the whole buffer into a new slice.
func (b *Buffer[T]) ToSlice() ([]T, error) {
	out := make([]T, b.n)
	if err := b.Download(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Close is Free: a Buffer is an io.Closer.
func (b *Buffer[T]) Close() error { return b.Free() }

// Free releases the memory (tf_free, through the buffer's Runtime); a
// second Free does nothing.  See Runtime.Free for the ordering rules.
func (b *Buffer[T]) Free() error {
	if b.ptr == 0 {
		return nil
	}
	if err := b.rt.Free(b.ptr); err != nil {
		return err
	}
	b.ptr, b.n = 0, 0
	return nil
}
