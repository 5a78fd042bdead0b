package tenferro

// #cgo pkg-config: tenferro_gpu
// #include "shim.h"
import "C"

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
