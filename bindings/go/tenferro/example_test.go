// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro_test

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// A complete program: create a runtime, give this goroutine a Stream (a
// stable stream slot), queue work on it, wait for it.  Without a GPU, or
// without libtenferro_gpu.so.1, it does nothing.
func Example() {
	if !tenferro.GPUAvailable() {
		fmt.Println("ok") // nothing to run on
		return
	}
	rt, err := tenferro.NewRuntime(0)
	if err != nil {
		fmt.Println("no runtime:", err)
		return
	}
	defer rt.Close()

	worker, err := rt.NewStream(0) // same CUDA stream from any OS thread
	if err != nil {
		fmt.Println(err)
		return
	}
	defer worker.Close()

	err = worker.StreamEnqueue(func(stream unsafe.Pointer) error {
		// The primary context is current on this OS thread: queue work
		// of other libraries on the Stream's CUDA stream, ...
		return nil
	})
	if err == nil {
		err = worker.Sync()
	}
	var e *tenferro.Error
	if errors.As(err, &e) {
		fmt.Println(e.Op, e.Call, e.Code, e.Message)
		return
	}
	fmt.Println("ok")
	// Output: ok
}

// Wait for a Stream's work with a deadline.  When the deadline passes first
// the work goes on (device work cannot be cancelled): the buffers it uses
// must stay untouched until the error's Event says it is done.
func ExampleStream_SyncContext() {
	var worker *tenferro.Stream // from rt.NewStream(slot)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := worker.SyncContext(ctx)
	var pending *tenferro.PendingWorkError
	if errors.As(err, &pending) {
		// errors.Is(err, context.DeadlineExceeded) holds too.  Keep the
		// work's buffers; wait for it elsewhere, or poll:
		done, _ := pending.Event.Done()
		fmt.Println("still running:", !done)
	}
}

// Download with a deadline: on a timeout dst is left untouched and the
// device work producing src goes on.
func ExampleDownloadContext() {
	var worker *tenferro.Stream // from rt.NewStream(slot)
	var src *tenferro.Buffer[float32]
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	dst := make([]float32, src.Len())
	if err := tenferro.DownloadContext(ctx, worker, dst, src.Ptr()); errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("not done yet; src is still in use:", err)
	}
}

// A program that merely can use a GPU: without libtenferro_gpu.so.1, or
// built with CGO_ENABLED=0, every call returns ErrNotAvailable.
func ExampleErrNotAvailable() {
	rt, err := tenferro.NewRuntime(0)
	if errors.Is(err, tenferro.ErrNotAvailable) {
		fmt.Println("no GPU: running on the CPU")
		return
	}
	if err != nil {
		fmt.Println("no usable GPU:", err)
		return
	}
	defer rt.Close()
}

// Page-locked memory of the program's own, which Go does not manage, for
// asynchronous copies: MapHostMemory maps it, HostRegister page-locks it
// (an unsafe.Pointer and a length: a Go slice does not compile), and the
// memory cannot be unmapped while it is registered.
func ExampleMapHostMemory() {
	var worker *tenferro.Stream // from rt.NewStream(slot)
	var src *tenferro.Buffer[byte]
	mem, err := tenferro.MapHostMemory(src.Len())
	if err != nil {
		return
	}
	defer mem.Close() // after the Registration's Close below
	reg, err := worker.HostRegister(mem.Ptr(), mem.Len())
	if err != nil {
		return
	}
	defer reg.Close()
	ev, err := tenferro.DownloadAsync(worker, mem.UnsafeBytes(), src.Ptr())
	if err != nil {
		return
	}
	defer ev.Close()
	if ev.Wait() == nil {
		mem.With(func(b []byte) { fmt.Println(b[0]) })
	}
}

// Read a page-locked block inside With: the block cannot go back to the
// pool (and be handed to someone else) before the function returns, even if
// another goroutine closes the HostBuffer meanwhile.
func ExampleHostBuffer_With() {
	var worker *tenferro.Stream // from rt.NewStream(slot)
	var src *tenferro.Buffer[float32]
	h, err := worker.HostAlloc(4 * src.Len())
	if err != nil {
		return
	}
	defer h.Close()
	ev, err := src.DownloadAsync(tenferro.UnsafeHostSlice[float32](h)) // the device's until ev is done
	if err != nil {
		return
	}
	defer ev.Close()
	if ev.Wait() != nil {
		return
	}
	tenferro.WithHostSlice(h, func(values []float32) { fmt.Println(values[0]) })
}
