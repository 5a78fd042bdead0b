// SPDX-License-Identifier: MIT OR Apache-2.0
// Package tenferro drives one CUDA device's runtime through tenferro-gpu's C
// library (libtenferro_gpu.so.1): the device's primary context, stream slots
// and what hangs off them: a cuBLAS handle per slot (CublasEnqueue, with
// Sgemm and Dgemm helpers that call the library's own cuBLAS), work of any
// library on a slot's stream (StreamEnqueue), device memory and transfers
// of Go slices (Buffer, Upload, Download, DownloadScalar), page-locked host
// memory and asynchronous copies (HostAlloc, HostRegister, DownloadAsync,
// UploadAsync), events and SlotWait for ordering slots, deferred release of
// workspaces (Retire), and modules, kernels and NVRTC (LoadModule, Launch,
// Compile).
//
// The module is github.com/tensor4all/tenferro-gpu/bindings/go (Go 1.19 or
// newer; no dependencies); this package is its /tenferro.  It is licensed
// under MIT OR Apache-2.0, at your option: see LICENSE, LICENSE-MIT and
// LICENSE-APACHE at the top of the tenferro-gpu repository.  The guide is
// docs/go.md there.
//
// # Streams: the way to use this package from goroutines
//
// The C library picks a stream slot from the calling OS thread, and Go moves
// a goroutine between OS threads between any two calls, so an upload and
// the download after it may land on two different, unordered CUDA streams.
// A Stream (Runtime.NewStream) is a reference bound to one slot: every call
// through it uses that slot from whatever thread it runs on.  Give each
// goroutine, or each independent sequence of work, its own Stream, and pass
// it where a Queue is taken:
//
//	rt, err := tenferro.NewRuntime(0)
//	...
//	s, err := rt.NewStream(0)
//	defer s.Close()
//	buf, err := tenferro.BufferFrom(s, values)  // upload on s
//	err = s.CublasEnqueue(mode, gemm)            // after it, on s
//	got, err := buf.ToSlice()                    // after both, on s
//
// The Runtime's own methods that queue work use the calling OS thread's
// slot; they suit code that locks its goroutine to a thread
// (runtime.LockOSThread) and little else.
//
// # Waiting with a context
//
// SyncContext, DownloadContext, DownloadScalarContext, Buffer.DownloadContext
// and Event.SynchronizeContext stop waiting when their context is done.
// Device work cannot be cancelled: they return a *PendingWorkError (which
// wraps ctx.Err()) and the work goes on, still using its buffers, which
// must not be freed, reused or read until the error's Event is done.  They
// wait by querying an event with a backoff; context.Background() takes the
// blocking call.
//
// # Who may free what while the device works
//
// Every object that owns memory or a reference is an io.Closer; a second
// Close of memory does nothing.  docs/go.md, "Lifetime rules", says the
// rules in full; in short:
//
//   - Device memory (Buffer, Alloc) is not garbage collected: Close or Free
//     it once no slot still uses it, or Retire its release.
//   - A HostBuffer's block is lent to Go code by With and WithHostSlice: a
//     Close meanwhile waits for the last With.  UnsafeBytes and
//     UnsafeHostSlice are the raw view, for the asynchronous copies; a
//     slice of it kept past Close aliases the next block or faults.
//   - HostRegister takes memory Go does not manage, as an unsafe.Pointer and
//     a length (MapHostMemory's, syscall.Mmap's, C's); MapHostMemory's
//     Close refuses while a runtime has it registered.
//   - Until an asynchronous copy's Event is done its host memory belongs to
//     the device; Close of its HostBuffer is safe meanwhile (the pool waits).
//   - After a failed synchronous Download or Upload through page-locked
//     memory the device may still use it: Close of its HostBuffer or
//     Registration keeps it from reuse until that stream has passed the
//     copy, or leaks it (ErrLeaked).
//
// # Errors
//
// Every fallible function returns an error that is a *Error (the
// ...Context variants may also return a *PendingWorkError): use errors.As
// to read its Status, Op (the tf_* function that failed), Call (the CUDA,
// cuBLAS or NVRTC call inside it), Code and Message, or errors.Is with a
// Status value or a sentinel (ErrNotAvailable, ErrLibraryTooOld,
// ErrLeaked); errors.As with a *Status reads the status alone:
//
//	if errors.Is(err, tenferro.StatusDeviceFault) { ... }
//
// The C library keeps its last error per OS thread; every call goes through
// a C wrapper that copies it inside the same cgo call as the failing
// function (shim.h), so a goroutine's error is its own.
//
// # Loading the library
//
// The package does not link libtenferro_gpu.so.1: it opens it with dlopen
// at the first call that needs it and resolves every function it calls
// then.  A program therefore starts where the library is absent, and every
// call returns an error that is ErrNotAvailable (GPUAvailable is false);
// the same holds for a program built with CGO_ENABLED=0, where the package
// builds without cgo, with the same API.  The library is looked up as:
//
//   - TENFERRO_GPU_LIBRARY, when set: the absolute path of the file to load,
//     and the only one tried (a relative path is refused; ignored in
//     set-user-ID programs);
//   - else libtenferro_gpu.so.1 through the dynamic loader's search path:
//     the program's RUNPATH (go build -ldflags='-r /path/to/lib'),
//     LD_LIBRARY_PATH, the ld.so cache, the system folders.
//
// LibraryPath says which file was loaded, or why none was.  A library of
// another major version, or one lacking a function of 1.0, is refused with
// ErrNotAvailable.  An older 1.x library than the header the package was
// built with is used: the calls that need a function it lacks (those new
// in 1.1: HostAlloc, HostRegister, HostStats, HostTrim, DownloadAsync,
// UploadAsync, Program.Clone) return StatusNotSupported and
// ErrLibraryTooOld; Program.Close falls back to the 1.0 release.  The CUDA
// driver, cuBLAS and NVRTC are loaded by the library, never linked.
//
// Building needs a C compiler and the header tenferro_gpu.h: the package
// looks in the include/ folder of the tenferro-gpu checkout it sits in, then
// on the compiler's path (an installed header: make install); else set
// CGO_CFLAGS=-I<folder>.
//
// # Build tags
//
//   - cgo (the default where a C compiler is found): the binding proper.
//   - !cgo (CGO_ENABLED=0): the same API; every call returns ErrNotAvailable.
//   - tenferro_linked: link the library at build time instead (found with
//     pkg-config tenferro_gpu: PKG_CONFIG_PATH must find tenferro_gpu.pc),
//     as ordinary C dependencies are; the program then does not start
//     without it, and TENFERRO_GPU_LIBRARY is ignored.
//
// # Callbacks
//
// Inside the callbacks of WithContext, StreamEnqueue and CublasEnqueue the
// function runs on the OS thread whose current CUDA context was switched;
// cgo keeps the goroutine on that thread until the function returns.  A
// panic in it continues from the call once the library has restored the
// context.
//
// # Testing without a GPU
//
// Programs and this package's tests run against tenferro-gpu's CUDA driver
// double (make install-double) by putting its folder first on the loader's
// path: LD_LIBRARY_PATH=$PREFIX/lib/tenferro_gpu/double:$LD_LIBRARY_PATH.
// The double runs stream work only when something waits for it, so a
// program that only polls (the ...Context variants, Event.Done loops) sees
// it finish once the double is told to run work on its own; docs/go.md says
// how.
package tenferro
