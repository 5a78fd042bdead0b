// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

// #include "shim.h"
import "C"

import "unsafe"

// Graph capture: optional (1.2) entries of the table, whose wrappers
// report a library that lacks them.

func cgraph(g unsafe.Pointer) *C.tf_graph { return (*C.tf_graph)(g) }

func graphCaptureBegin(p unsafe.Pointer) error {
	return takeError(C.go_tf_graph_capture_begin(crt(p)))
}

func graphCaptureEnd(p unsafe.Pointer) (unsafe.Pointer, error) {
	var out *C.tf_graph
	err := takeError(C.go_tf_graph_capture_end(crt(p), &out))
	return unsafe.Pointer(out), err
}

func graphCaptureUpdate(p, g unsafe.Pointer) (bool, error) {
	var inPlace C.int32_t
	err := takeError(C.go_tf_graph_capture_update(crt(p), cgraph(g), &inPlace))
	return inPlace != 0, err
}

func graphCaptureAbort(p unsafe.Pointer) error {
	return takeError(C.go_tf_graph_capture_abort(crt(p)))
}

func graphLaunch(p, g unsafe.Pointer) error {
	return takeError(C.go_tf_graph_launch(crt(p), cgraph(g)))
}

func graphRetain(g unsafe.Pointer) error  { return takeError(C.go_tf_graph_retain(cgraph(g))) }
func graphRelease(g unsafe.Pointer) error { return takeError(C.go_tf_graph_release(cgraph(g))) }
