package tenferro

// #include <tenferro_gpu.h>
import "C"

// Status is the result code of a tf_* function (enum tf_status_code).  Values
// are the header's and never renumbered.  A Status is also an error, so
// errors.Is(err, StatusCUDA) asks whether err carries that status.
type Status int32

// Every status the library returns.
const (
	StatusOK                = Status(C.TF_OK)
	StatusInvalidArgument   = Status(C.TF_ERROR_INVALID_ARGUMENT)
	StatusInvalidHandle     = Status(C.TF_ERROR_INVALID_HANDLE)
	StatusDriverNotFound    = Status(C.TF_ERROR_DRIVER_NOT_FOUND)
	StatusDriverStub        = Status(C.TF_ERROR_DRIVER_STUB)
	StatusNoDevice          = Status(C.TF_ERROR_NO_DEVICE)
	StatusDeviceUnavailable = Status(C.TF_ERROR_DEVICE_UNAVAILABLE)
	StatusDriverTooOld      = Status(C.TF_ERROR_DRIVER_TOO_OLD)
	StatusCUDA              = Status(C.TF_ERROR_CUDA)
	StatusNotSupported      = Status(C.TF_ERROR_NOT_SUPPORTED)
	StatusLibraryNotFound   = Status(C.TF_ERROR_LIBRARY_NOT_FOUND)
	StatusProvider          = Status(C.TF_ERROR_PROVIDER)
	StatusCallback          = Status(C.TF_ERROR_CALLBACK)
	StatusOutOfMemory       = Status(C.TF_ERROR_OUT_OF_MEMORY)
	StatusRuntimeState      = Status(C.TF_ERROR_RUNTIME_STATE)
	StatusDeviceFault       = Status(C.TF_ERROR_DEVICE_FAULT)
	StatusCompile           = Status(C.TF_ERROR_COMPILE)
	StatusInternal          = Status(C.TF_ERROR_INTERNAL)
)

// String is the library's static description (tf_status_string), for
// example "invalid argument"; an unknown value gives "unknown status".
func (s Status) String() string {
	return C.GoString(C.tf_status_string(C.tf_status(s)))
}

// Error makes a Status usable as an errors.Is target.
func (s Status) Error() string { return s.String() }

// CodeDomain says what Error.Code means (enum tf_code_domain).
type CodeDomain int32

// Every code domain.
const (
	CodeNone     = CodeDomain(C.TF_CODE_NONE)     // the library itself refused
	CodeCUDA     = CodeDomain(C.TF_CODE_CUDA)     // a CUresult
	CodeCUBLAS   = CodeDomain(C.TF_CODE_CUBLAS)   // a cublasStatus_t
	CodeNVRTC    = CodeDomain(C.TF_CODE_NVRTC)    // an nvrtcResult
	CodeCallback = CodeDomain(C.TF_CODE_CALLBACK) // a callback's nonzero return
	CodeSystem   = CodeDomain(C.TF_CODE_SYSTEM)   // an errno value
)
