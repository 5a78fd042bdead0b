// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build !cgo

package tenferro

import "unsafe"

// Built without cgo (CGO_ENABLED=0), the package cannot call the C
// library.  Its API is the same (every exported name is declared in the
// files shared by both builds), and every call that would reach the
// library returns ErrNotAvailable, so that packages importing it still
// build and run.  No object (Runtime, Event, ...) can be made, so the
// functions below that take one are never reached; they exist so that the
// shared code compiles.

// headerVersionNumber is HeaderVersion: a build without cgo reads no
// header.
const headerVersionNumber = nocgoHeaderVersion

const noCgo = "the tenferro Go binding was built without cgo (CGO_ENABLED=0), so it cannot call libtenferro_gpu.so.1: build with CGO_ENABLED=1 and a C compiler (gcc) on PATH"

func load(op string) error { return notAvailable(op, noCgo) }

func libraryPath() (string, error)                { return "", load("tf_version") }
func statusText(Status) (string, bool)            { return "", false }
func libraryVersion() (uint32, string, bool)      { return 0, "", false }
func gpuAvailable() bool                          { return false }
func deviceCount() (int, error)                   { return 0, load("tf_device_count") }
func libraryDefaultOptions() (Options, bool)      { return Options{}, false }
func cublasVersion() (int, error)                 { return 0, load("tf_cublas_version") }
func cublasSymbol(string) (unsafe.Pointer, error) { return nil, load("tf_cublas_symbol") }
func setLogCallback(func(LogLevel, string)) error { return load("tf_set_log_callback") }
func deviceInfo(int32) (DeviceProperties, error)  { return DeviceProperties{}, load("tf_device_info") }
func runtimeNew(_ int32, v *optionValues) (unsafe.Pointer, error) {
	if v != nil {
		return nil, load("tf_runtime_new_with_options")
	}
	return nil, load("tf_runtime_new")
}

// Calls on objects, which cannot exist in this build.

func runtimeRetain(unsafe.Pointer) error  { return load("tf_runtime_retain") }
func runtimeRelease(unsafe.Pointer) error { return load("tf_runtime_release") }
func runtimeSync(unsafe.Pointer) error    { return load("tf_runtime_sync") }
func runtimeBindSlot(unsafe.Pointer, int32) (unsafe.Pointer, error) {
	return nil, load("tf_runtime_bind_slot")
}
func runtimeIdentity(unsafe.Pointer) (uint64, error) { return 0, load("tf_runtime_identity") }
func runtimeAllocationDomain(unsafe.Pointer) (uint64, error) {
	return 0, load("tf_runtime_allocation_domain")
}
func runtimeDeviceInfo(unsafe.Pointer) (DeviceProperties, error) {
	return DeviceProperties{}, load("tf_runtime_device_info")
}
func runtimeSupports(unsafe.Pointer, int32) (bool, error) { return false, load("tf_runtime_supports") }
func runtimePrimaryContext(unsafe.Pointer) (unsafe.Pointer, error) {
	return nil, load("tf_runtime_primary_context")
}
func runtimeSlotCount(unsafe.Pointer) (int32, error)   { return 0, load("tf_runtime_slot_count") }
func runtimeCurrentSlot(unsafe.Pointer) (int32, error) { return 0, load("tf_runtime_current_slot") }
func runtimeStream(unsafe.Pointer) (unsafe.Pointer, error) {
	return nil, load("tf_runtime_stream")
}
func runtimeSlotStream(unsafe.Pointer, int32) (unsafe.Pointer, error) {
	return nil, load("tf_runtime_slot_stream")
}
func slotWait(unsafe.Pointer, int32) error         { return load("tf_slot_wait") }
func workspacePoll(unsafe.Pointer) error           { return load("tf_workspace_poll") }
func workspaceRetire(unsafe.Pointer, func()) error { return load("tf_workspace_retire") }
func workspaceStats(unsafe.Pointer) (RetirementStats, error) {
	return RetirementStats{}, load("tf_workspace_stats")
}
func withContext(unsafe.Pointer, *callback) error            { return load("tf_with_context") }
func streamEnqueue(unsafe.Pointer, *callback) error          { return load("tf_stream_enqueue") }
func cublasEnqueue(unsafe.Pointer, *callback) error          { return load("tf_cublas_enqueue") }
func eventNew(unsafe.Pointer) (unsafe.Pointer, error)        { return nil, load("tf_event_new") }
func eventRetain(unsafe.Pointer) error                       { return load("tf_event_retain") }
func eventRelease(unsafe.Pointer) error                      { return load("tf_event_release") }
func eventSynchronize(unsafe.Pointer) error                  { return load("tf_event_synchronize") }
func eventRecord(unsafe.Pointer, unsafe.Pointer) error       { return load("tf_event_record") }
func eventWait(unsafe.Pointer, unsafe.Pointer) error         { return load("tf_event_wait") }
func eventQuery(unsafe.Pointer) (bool, error)                { return false, load("tf_event_query") }
func deviceAlloc(unsafe.Pointer, uintptr) (DevicePtr, error) { return 0, load("tf_alloc") }
func deviceFree(unsafe.Pointer, DevicePtr) error             { return load("tf_free") }
func moduleRetain(unsafe.Pointer) error                      { return load("tf_module_retain") }
func moduleRelease(unsafe.Pointer) error                     { return load("tf_module_release") }
func programRelease(unsafe.Pointer) error                    { return load("tf_program_release_checked") }
func programRetain(unsafe.Pointer) error                     { return load("tf_program_retain") }
func programImage(unsafe.Pointer) ([]byte, error)            { return nil, load("tf_program_image") }
func programLog(unsafe.Pointer) (string, error)              { return "", load("tf_program_log") }
func peerCopyAvailable(unsafe.Pointer, unsafe.Pointer) (bool, error) {
	return false, load("tf_peer_copy_available")
}
func upload(unsafe.Pointer, unsafe.Pointer, DevicePtr, uintptr) (failedCopy, error) {
	return failedCopy{}, load("tf_upload")
}
func download(unsafe.Pointer, DevicePtr, unsafe.Pointer, uintptr) (failedCopy, error) {
	return failedCopy{}, load("tf_download")
}
func downloadScalar(unsafe.Pointer, DevicePtr, unsafe.Pointer, uintptr) error {
	return load("tf_download_scalar")
}
func deviceCopy(unsafe.Pointer, DevicePtr, DevicePtr, uintptr) error { return load("tf_copy") }
func peerCopy(unsafe.Pointer, DevicePtr, unsafe.Pointer, DevicePtr, uintptr) error {
	return load("tf_peer_copy")
}
func moduleLoad(unsafe.Pointer, unsafe.Pointer, uintptr) (unsafe.Pointer, error) {
	return nil, load("tf_module_load")
}
func moduleFunction(unsafe.Pointer, string) (unsafe.Pointer, error) {
	return nil, load("tf_module_function")
}
func functionSetAttribute(unsafe.Pointer, unsafe.Pointer, int32, int32) error {
	return load("tf_function_set_attribute")
}
func kernelLaunch(unsafe.Pointer, unsafe.Pointer, *LaunchConfig, paramLayout) error {
	return load("tf_kernel_launch")
}
func programCompile(unsafe.Pointer, string, *compileValues) (unsafe.Pointer, error) {
	return nil, load("tf_program_compile")
}
func gemmCall(*gemmOperands, bool, unsafe.Pointer, unsafe.Pointer) int32 {
	return int32(CublasStatusNotInitialized)
}
func hostAlloc(unsafe.Pointer, uintptr) (unsafe.Pointer, error) { return nil, load("tf_host_alloc") }
func hostFree(unsafe.Pointer, unsafe.Pointer) error             { return load("tf_host_free") }
func hostRecordUse(unsafe.Pointer, unsafe.Pointer) error        { return load("tf_host_record_use") }
func hostRegister(unsafe.Pointer, unsafe.Pointer, uintptr) error {
	return load("tf_host_register")
}
func hostUnregister(unsafe.Pointer, unsafe.Pointer) error { return load("tf_host_unregister") }
func hostStats(unsafe.Pointer) (HostPoolStats, error)     { return HostPoolStats{}, load("tf_host_stats") }
func hostTrim(unsafe.Pointer) error                       { return load("tf_host_trim") }
func downloadAsync(unsafe.Pointer, DevicePtr, unsafe.Pointer, uintptr) error {
	return load("tf_download_async")
}
func uploadAsync(unsafe.Pointer, unsafe.Pointer, DevicePtr, uintptr) error {
	return load("tf_upload_async")
}
func memoryStats(unsafe.Pointer) (MemoryStats, error) { return MemoryStats{}, load("tf_memory_stats") }
func memoryResetPeak(unsafe.Pointer) error            { return load("tf_memory_reset_peak") }
func memoryTrim(unsafe.Pointer, uint64) error         { return load("tf_memory_trim") }
func memoryRecordUse(unsafe.Pointer, DevicePtr) error { return load("tf_memory_record_use") }
func graphCaptureBegin(unsafe.Pointer) error          { return load("tf_graph_capture_begin") }
func graphCaptureEnd(unsafe.Pointer) (unsafe.Pointer, error) {
	return nil, load("tf_graph_capture_end")
}
func graphCaptureUpdate(unsafe.Pointer, unsafe.Pointer) (bool, error) {
	return false, load("tf_graph_capture_update")
}
func graphCaptureAbort(unsafe.Pointer) error           { return load("tf_graph_capture_abort") }
func graphLaunch(unsafe.Pointer, unsafe.Pointer) error { return load("tf_graph_launch") }
func graphRetain(unsafe.Pointer) error                 { return load("tf_graph_retain") }
func graphRelease(unsafe.Pointer) error                { return load("tf_graph_release") }
