// Package tenferro drives one CUDA device's runtime through tenferro-gpu's C
// library (libtenferro_gpu.so.1): the device's primary context, per-thread
// stream slots and what hangs off them: a cuBLAS handle per slot
// (CublasEnqueue, with Sgemm and Dgemm helpers that call the library's own
// cuBLAS), work of any library on a slot's stream (StreamEnqueue), device
// memory and transfers of Go slices (Buffer, Upload, Download,
// DownloadScalar), events and SlotWait for ordering slots, deferred release
// of workspaces (Retire), and modules, kernels and NVRTC (LoadModule,
// Launch, Compile).
//
// The package links the library with cgo through pkg-config
// (`#cgo pkg-config: tenferro_gpu`), so PKG_CONFIG_PATH must find
// tenferro_gpu.pc at build time and the dynamic loader must find
// libtenferro_gpu.so.1 at run time (an installed copy, or LD_LIBRARY_PATH).
// The CUDA driver, cuBLAS and NVRTC are loaded by the library at run time;
// nothing links against them.
//
// # Errors
//
// Every fallible function returns an error that is a *Error: use errors.As
// to read its Status, Op (the tf_* function that failed), Call (the CUDA,
// cuBLAS or NVRTC call inside it), Code and Message, or errors.Is with a
// Status value:
//
//	if errors.Is(err, tenferro.StatusDeviceFault) { ... }
//
// # Goroutines and OS threads
//
// The C library keeps its last error per OS thread and picks a stream slot
// from the calling OS thread.  A goroutine can move to another OS thread
// between any two cgo calls, so this package never reads the thread-local
// error in a separate call: every wrapper copies it inside the same cgo call
// as the failing function (see shim.h).  For a stable stream slot, use
// Runtime.BindSlot: the bound Runtime uses its slot from any thread, so its
// uploads, GEMMs, launches and downloads are ordered on one stream.
//
// Inside the callbacks of WithContext, StreamEnqueue and CublasEnqueue the
// function runs on the OS thread whose current CUDA context was switched;
// cgo keeps the goroutine on that thread until the function returns.  A
// panic in it continues from the call once the library has restored the
// context.
package tenferro
