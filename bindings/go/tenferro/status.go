// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import "fmt"

// Status is the result code of a tf_* function (enum tf_status_code).  Values
// are the header's and never renumbered.  A Status is also an error, so
// errors.Is(err, StatusCUDA) asks whether err carries that status.
type Status int32

// Every status the library returns (the header's values; the cgo build
// checks each against the header at compile time, headercheck_cgo.go).
const (
	StatusOK                Status = 0
	StatusInvalidArgument   Status = 1
	StatusInvalidHandle     Status = 2
	StatusDriverNotFound    Status = 3
	StatusDriverStub        Status = 4
	StatusNoDevice          Status = 5
	StatusDeviceUnavailable Status = 6
	StatusDriverTooOld      Status = 7
	StatusCUDA              Status = 8
	StatusNotSupported      Status = 9
	StatusLibraryNotFound   Status = 10
	StatusProvider          Status = 11
	StatusCallback          Status = 12
	StatusOutOfMemory       Status = 13
	StatusRuntimeState      Status = 14
	StatusDeviceFault       Status = 15
	StatusCompile           Status = 16
	StatusInternal          Status = 17
)

// statusNames are the constants' names, what String says when the library
// that describes statuses is not available.
var statusNames = [...]string{
	"StatusOK", "StatusInvalidArgument", "StatusInvalidHandle", "StatusDriverNotFound",
	"StatusDriverStub", "StatusNoDevice", "StatusDeviceUnavailable", "StatusDriverTooOld",
	"StatusCUDA", "StatusNotSupported", "StatusLibraryNotFound", "StatusProvider",
	"StatusCallback", "StatusOutOfMemory", "StatusRuntimeState", "StatusDeviceFault",
	"StatusCompile", "StatusInternal",
}

// String is the library's static description (tf_status_string), for
// example "invalid argument"; an unknown value gives "unknown status".
// Without the library (ErrNotAvailable) it is the constant's name,
// "StatusLibraryNotFound", or "Status(N)".
func (s Status) String() string {
	if text, ok := statusText(s); ok {
		return text
	}
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int32(s))
}

// Error makes a Status usable as an errors.Is target.
func (s Status) Error() string { return s.String() }

// CodeDomain says what Error.Code means (enum tf_code_domain).
type CodeDomain int32

// Every code domain.
const (
	CodeNone     CodeDomain = 0 // the library itself refused
	CodeCUDA     CodeDomain = 1 // a CUresult
	CodeCUBLAS   CodeDomain = 2 // a cublasStatus_t
	CodeNVRTC    CodeDomain = 3 // an nvrtcResult
	CodeCallback CodeDomain = 4 // a callback's nonzero return
	CodeSystem   CodeDomain = 5 // an errno value
)
