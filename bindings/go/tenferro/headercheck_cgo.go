// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

// #include <tenferro_gpu.h>
import "C"

// The enum values this package spells as Go constants (so that the !cgo
// build has them too) are the header's: the header never renumbers them,
// so a difference is a typo, and it fails the build here.  Each line
// indexes a one-element array with the difference, which must be 0.
func _() {
	var x [1]struct{}
	_ = x[StatusOK-C.TF_OK]
	_ = x[StatusInvalidArgument-C.TF_ERROR_INVALID_ARGUMENT]
	_ = x[StatusInvalidHandle-C.TF_ERROR_INVALID_HANDLE]
	_ = x[StatusDriverNotFound-C.TF_ERROR_DRIVER_NOT_FOUND]
	_ = x[StatusDriverStub-C.TF_ERROR_DRIVER_STUB]
	_ = x[StatusNoDevice-C.TF_ERROR_NO_DEVICE]
	_ = x[StatusDeviceUnavailable-C.TF_ERROR_DEVICE_UNAVAILABLE]
	_ = x[StatusDriverTooOld-C.TF_ERROR_DRIVER_TOO_OLD]
	_ = x[StatusCUDA-C.TF_ERROR_CUDA]
	_ = x[StatusNotSupported-C.TF_ERROR_NOT_SUPPORTED]
	_ = x[StatusLibraryNotFound-C.TF_ERROR_LIBRARY_NOT_FOUND]
	_ = x[StatusProvider-C.TF_ERROR_PROVIDER]
	_ = x[StatusCallback-C.TF_ERROR_CALLBACK]
	_ = x[StatusOutOfMemory-C.TF_ERROR_OUT_OF_MEMORY]
	_ = x[StatusRuntimeState-C.TF_ERROR_RUNTIME_STATE]
	_ = x[StatusDeviceFault-C.TF_ERROR_DEVICE_FAULT]
	_ = x[StatusCompile-C.TF_ERROR_COMPILE]
	_ = x[StatusInternal-C.TF_ERROR_INTERNAL]
	_ = x[CodeNone-C.TF_CODE_NONE]
	_ = x[CodeCUDA-C.TF_CODE_CUDA]
	_ = x[CodeCUBLAS-C.TF_CODE_CUBLAS]
	_ = x[CodeNVRTC-C.TF_CODE_NVRTC]
	_ = x[CodeCallback-C.TF_CODE_CALLBACK]
	_ = x[CodeSystem-C.TF_CODE_SYSTEM]
	_ = x[CapNativeModules-C.TF_CAP_NATIVE_MODULES]
	_ = x[CapRuntimeCompilation-C.TF_CAP_RUNTIME_COMPILATION]
	_ = x[CapRawStream-C.TF_CAP_RAW_STREAM]
	_ = x[CapSameDeviceCopy-C.TF_CAP_SAME_DEVICE_COPY]
	_ = x[CapPeerCopy-C.TF_CAP_PEER_COPY]
	_ = x[CapCUBLAS-C.TF_CAP_CUBLAS]
	_ = x[CapStreamOrderedAlloc-C.TF_CAP_STREAM_ORDERED_ALLOC]
	_ = x[PointerModeHost-C.TF_CUBLAS_POINTER_MODE_HOST]
	_ = x[PointerModeDevice-C.TF_CUBLAS_POINTER_MODE_DEVICE]
	_ = x[LogWarning-C.TF_LOG_WARNING]
	_ = x[LogError-C.TF_LOG_ERROR]
	_ = x[CompilePTX-C.TF_COMPILE_PTX]
	_ = x[CompileCUBIN-C.TF_COMPILE_CUBIN]
}

// What the header this package is built with says about the limits and
// defaults the Go constants spell; a newer header may raise a limit, so
// these are compared in a test (TestConstantsMatchTheHeader), not here.
var headerLimits = map[string][2]int64{
	"MaxStreamSlots":              {MaxStreamSlots, C.TF_MAX_STREAM_SLOTS},
	"MaxRetirementCapacity":       {MaxRetirementCapacity, C.TF_MAX_RETIREMENT_CAPACITY},
	"DefaultDownloadThreads":      {DefaultDownloadThreads, C.TF_DEFAULT_DOWNLOAD_THREADS},
	"MaxDownloadThreads":          {MaxDownloadThreads, C.TF_MAX_DOWNLOAD_THREADS},
	"DefaultDownloadChunkBytes":   {DefaultDownloadChunkBytes, C.TF_DEFAULT_DOWNLOAD_CHUNK_BYTES},
	"MinDownloadChunkBytes":       {MinDownloadChunkBytes, C.TF_MIN_DOWNLOAD_CHUNK_BYTES},
	"MaxDownloadChunkBytes":       {MaxDownloadChunkBytes, C.TF_MAX_DOWNLOAD_CHUNK_BYTES},
	"MaxScalarDownload":           {MaxScalarDownload, C.TF_SCALAR_DOWNLOAD_MAX_BYTES},
	"defaultStreamSlots":          {defaultStreamSlots, C.TF_DEFAULT_STREAM_SLOTS},
	"defaultCublasWorkspaceBytes": {defaultCublasWorkspaceBytes, C.TF_DEFAULT_CUBLAS_WORKSPACE_BYTES},
	"defaultRetirementCapacity":   {defaultRetirementCapacity, C.TF_DEFAULT_RETIREMENT_CAPACITY},
	"nocgoHeaderVersion":          {nocgoHeaderVersion, C.TF_VERSION_NUMBER},
	"MinMemoryReservedLimit":      {MinMemoryReservedLimit, C.TF_MIN_MEMORY_RESERVED_LIMIT},
}

// headerReleaseThreshold is the header's TF_DEFAULT_MEMORY_RELEASE_THRESHOLD
// (a uint64, beyond headerLimits' int64).
const headerReleaseThreshold uint64 = C.TF_DEFAULT_MEMORY_RELEASE_THRESHOLD
