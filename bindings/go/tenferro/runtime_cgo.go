// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

// #include "shim.h"
import "C"

import "unsafe"

// The calls on runtimes and events.  Each takes the C pointer a handle
// holds for the duration of the call (see handle.use).

func crt(p unsafe.Pointer) *C.tf_runtime { return (*C.tf_runtime)(p) }
func cev(p unsafe.Pointer) *C.tf_event   { return (*C.tf_event)(p) }

func runtimeRetain(p unsafe.Pointer) error  { return takeError(C.go_tf_runtime_retain(crt(p))) }
func runtimeRelease(p unsafe.Pointer) error { return takeError(C.go_tf_runtime_release(crt(p))) }
func runtimeSync(p unsafe.Pointer) error    { return takeError(C.go_tf_runtime_sync(crt(p))) }

func runtimeBindSlot(p unsafe.Pointer, slot int32) (unsafe.Pointer, error) {
	var out *C.tf_runtime
	err := takeError(C.go_tf_runtime_bind_slot(crt(p), C.int32_t(slot), &out))
	return unsafe.Pointer(out), err
}

func runtimeIdentity(p unsafe.Pointer) (uint64, error) {
	var v C.uint64_t
	err := takeError(C.go_tf_runtime_identity(crt(p), &v))
	return uint64(v), err
}

func runtimeAllocationDomain(p unsafe.Pointer) (uint64, error) {
	var v C.uint64_t
	err := takeError(C.go_tf_runtime_allocation_domain(crt(p), &v))
	return uint64(v), err
}

func runtimeDeviceInfo(p unsafe.Pointer) (DeviceProperties, error) {
	var d C.tf_device_properties
	C.go_tf_device_properties_init(&d, C.size_t(unsafe.Sizeof(d)))
	if err := takeError(C.go_tf_runtime_device_info(crt(p), &d)); err != nil {
		return DeviceProperties{}, err
	}
	return devicePropertiesFromC(&d), nil
}

func runtimeSupports(p unsafe.Pointer, capability int32) (bool, error) {
	var v C.int32_t
	err := takeError(C.go_tf_runtime_supports(crt(p), C.int32_t(capability), &v))
	return v != 0, err
}

func runtimePrimaryContext(p unsafe.Pointer) (unsafe.Pointer, error) {
	var v unsafe.Pointer
	err := takeError(C.go_tf_runtime_primary_context(crt(p), &v))
	return v, err
}

func runtimeSlotCount(p unsafe.Pointer) (int32, error) {
	var v C.int32_t
	err := takeError(C.go_tf_runtime_slot_count(crt(p), &v))
	return int32(v), err
}

func runtimeCurrentSlot(p unsafe.Pointer) (int32, error) {
	var v C.int32_t
	err := takeError(C.go_tf_runtime_current_slot(crt(p), &v))
	return int32(v), err
}

func runtimeStream(p unsafe.Pointer) (unsafe.Pointer, error) {
	var v unsafe.Pointer
	err := takeError(C.go_tf_runtime_stream(crt(p), &v))
	return v, err
}

func runtimeSlotStream(p unsafe.Pointer, slot int32) (unsafe.Pointer, error) {
	var v unsafe.Pointer
	err := takeError(C.go_tf_runtime_slot_stream(crt(p), C.int32_t(slot), &v))
	return v, err
}

func slotWait(p unsafe.Pointer, other int32) error {
	return takeError(C.go_tf_slot_wait(crt(p), C.int32_t(other)))
}

func workspacePoll(p unsafe.Pointer) error { return takeError(C.go_tf_workspace_poll(crt(p))) }

func workspaceStats(p unsafe.Pointer) (RetirementStats, error) {
	var s C.tf_retirement_stats
	C.go_tf_retirement_stats_init(&s, C.size_t(unsafe.Sizeof(s)))
	if err := takeError(C.go_tf_workspace_stats(crt(p), &s)); err != nil {
		return RetirementStats{}, err
	}
	return RetirementStats{
		Capacity:         int(s.capacity),
		Deferred:         uint64(s.deferred),
		Released:         uint64(s.released),
		BarrierFallbacks: uint64(s.barrier_fallbacks),
		Leaked:           uint64(s.leaked),
		InFlight:         uint64(s.in_flight),
		MaxInFlight:      uint64(s.max_in_flight),
	}, nil
}

func eventNew(p unsafe.Pointer) (unsafe.Pointer, error) {
	var out *C.tf_event
	err := takeError(C.go_tf_event_new(crt(p), &out))
	return unsafe.Pointer(out), err
}

func eventRetain(e unsafe.Pointer) error      { return takeError(C.go_tf_event_retain(cev(e))) }
func eventRelease(e unsafe.Pointer) error     { return takeError(C.go_tf_event_release(cev(e))) }
func eventSynchronize(e unsafe.Pointer) error { return takeError(C.go_tf_event_synchronize(cev(e))) }
func eventRecord(p, e unsafe.Pointer) error   { return takeError(C.go_tf_event_record(crt(p), cev(e))) }
func eventWait(p, e unsafe.Pointer) error     { return takeError(C.go_tf_event_wait(crt(p), cev(e))) }

func eventQuery(e unsafe.Pointer) (bool, error) {
	var v C.int32_t
	err := takeError(C.go_tf_event_query(cev(e), &v))
	return v != 0, err
}
