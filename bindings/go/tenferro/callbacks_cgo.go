// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

// #include "shim.h"
import "C"

import (
	"runtime/cgo"
	"sync"
	"unsafe"
)

// Go callbacks cross the library as a runtime/cgo.Handle passed as
// user_data; the trampolines of shim.c hand it back to the exported
// functions below.

// withHandle runs call with a handle of c, deleted afterwards: the library
// calls c only during the call.
func withHandle(c *callback, call func(h C.uintptr_t) *C.tf_error_info) error {
	h := cgo.NewHandle(c)
	defer h.Delete()
	return takeError(call(C.uintptr_t(h)))
}

func withContext(p unsafe.Pointer, c *callback) error {
	return withHandle(c, func(h C.uintptr_t) *C.tf_error_info { return C.go_tf_with_context(crt(p), h) })
}

func streamEnqueue(p unsafe.Pointer, c *callback) error {
	return withHandle(c, func(h C.uintptr_t) *C.tf_error_info { return C.go_tf_stream_enqueue(crt(p), h) })
}

func cublasEnqueue(p unsafe.Pointer, c *callback) error {
	return withHandle(c, func(h C.uintptr_t) *C.tf_error_info {
		return C.go_tf_cublas_enqueue(crt(p), C.int32_t(c.mode), h)
	})
}

func callbackOf(h C.uintptr_t) *callback { return cgo.Handle(h).Value().(*callback) }

//export tfgoRunContext
func tfgoRunContext(h C.uintptr_t) C.int32_t {
	c := callbackOf(h)
	return C.int32_t(c.run(c.context))
}

//export tfgoRunStream
func tfgoRunStream(h C.uintptr_t, stream unsafe.Pointer) C.int32_t {
	c := callbackOf(h)
	return C.int32_t(c.run(func() error { return c.stream(stream) }))
}

//export tfgoRunCublas
func tfgoRunCublas(h C.uintptr_t, handle, stream unsafe.Pointer) C.int32_t {
	return C.int32_t(callbackOf(h).runCublas(handle, stream))
}

// workspaceRetire hands release to the library, which calls it exactly
// once (tfgoRunRelease deletes the handle then), or never when it refuses.
func workspaceRetire(p unsafe.Pointer, release func()) error {
	h := cgo.NewHandle(release)
	err := takeError(C.go_tf_workspace_retire(crt(p), C.uintptr_t(h)))
	if err != nil {
		h.Delete() // the library will never call it
	}
	return err
}

//export tfgoRunRelease
func tfgoRunRelease(h C.uintptr_t) {
	handle := cgo.Handle(h)
	release := handle.Value().(func())
	handle.Delete() // called exactly once
	runRelease(release)
}

// logMu serializes setLogCallback so that the handle it frees is exactly
// the one the library stopped calling.
var (
	logMu     sync.Mutex
	logHandle cgo.Handle // 0: the library's default (stderr)
)

func setLogCallback(fn func(level LogLevel, message string)) error {
	const op = "tf_set_log_callback"
	if err := load(op); err != nil {
		return err
	}
	if C.tfgo_in_log_callback() != 0 {
		// The library refuses this itself; do not wait for logMu, which a
		// SetLogCallback on another thread may hold while it waits for
		// this very callback to finish.
		return takeError(C.go_tf_set_log_callback(0))
	}
	logMu.Lock()
	defer logMu.Unlock()
	var h cgo.Handle
	if fn != nil {
		h = cgo.NewHandle(fn)
	}
	if err := takeError(C.go_tf_set_log_callback(C.uintptr_t(h))); err != nil {
		if h != 0 {
			h.Delete()
		}
		return err
	}
	if logHandle != 0 {
		logHandle.Delete()
	}
	logHandle = h
	return nil
}

//export tfgoLog
func tfgoLog(h C.uintptr_t, level C.int32_t, message *C.char) {
	fn := cgo.Handle(h).Value().(func(LogLevel, string))
	runLog(fn, LogLevel(level), C.GoString(message))
}
