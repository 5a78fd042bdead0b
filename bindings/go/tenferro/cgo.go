package tenferro

// #cgo pkg-config: tenferro_gpu
// #include "shim.h"
import "C"

import "unsafe"

// takeError turns what a shim wrapper returned into an error (nil for
// NULL) and frees the C copy.
func takeError(info *C.tf_error_info) error {
	if info == nil {
		return nil
	}
	defer C.tfgo_error_free(info)
	return &Error{
		Status:  Status(info.status),
		Domain:  CodeDomain(info.code_domain),
		Code:    int32(info.code),
		Op:      C.GoString(&info.operation[0]),
		Call:    C.GoString(&info.call[0]),
		Message: C.GoString(&info.message[0]),
	}
}

// useC runs one shim wrapper with the handle's C pointer held.
func (h *handle) useC(op string, call func(unsafe.Pointer) *C.tf_error_info) error {
	return h.use(op, func(p unsafe.Pointer) error { return takeError(call(p)) })
}

// dropWith is a handle's drop function for a C release wrapper.
func dropWith(release func(unsafe.Pointer) *C.tf_error_info) func(unsafe.Pointer) error {
	return func(p unsafe.Pointer) error { return takeError(release(p)) }
}

// useBoth runs one shim wrapper with the C pointers of two handles held.
func useBoth(op string, a, b *handle, call func(pa, pb unsafe.Pointer) *C.tf_error_info) error {
	return a.use(op, func(pa unsafe.Pointer) error {
		return b.useC(op, func(pb unsafe.Pointer) *C.tf_error_info { return call(pa, pb) })
	})
}
