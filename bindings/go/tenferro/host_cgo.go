// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

// #include "shim.h"
import "C"

import "unsafe"

// Page-locked host memory and asynchronous copies: optional (1.1) entries
// of the table, whose wrappers report a library that lacks them.

func hostAlloc(p unsafe.Pointer, n uintptr) (unsafe.Pointer, error) {
	var out unsafe.Pointer
	err := takeError(C.go_tf_host_alloc(crt(p), C.size_t(n), &out))
	return out, err
}

func hostFree(p, ptr unsafe.Pointer) error { return takeError(C.go_tf_host_free(crt(p), ptr)) }

func hostRecordUse(p, ptr unsafe.Pointer) error {
	return takeError(C.go_tf_host_record_use(crt(p), ptr))
}

func hostRegister(p, ptr unsafe.Pointer, n uintptr) error {
	return takeError(C.go_tf_host_register(crt(p), ptr, C.size_t(n)))
}

func hostUnregister(p, ptr unsafe.Pointer) error {
	return takeError(C.go_tf_host_unregister(crt(p), ptr))
}

func hostStats(p unsafe.Pointer) (HostPoolStats, error) {
	var s C.tf_host_pool_stats
	if err := takeError(C.go_tf_host_pool_stats_init(&s, C.size_t(unsafe.Sizeof(s)))); err != nil {
		return HostPoolStats{}, err
	}
	if err := takeError(C.go_tf_host_stats(crt(p), &s)); err != nil {
		return HostPoolStats{}, err
	}
	return HostPoolStats{
		BytesInUse:        uint64(s.bytes_in_use),
		BytesCached:       uint64(s.bytes_cached),
		BytesRegistered:   uint64(s.bytes_registered),
		BlocksInUse:       uint64(s.blocks_in_use),
		BlocksCached:      uint64(s.blocks_cached),
		DriverAllocations: uint64(s.driver_allocations),
		PendingFrees:      uint64(s.pending_frees),
	}, nil
}

func hostTrim(p unsafe.Pointer) error { return takeError(C.go_tf_host_trim(crt(p))) }

func downloadAsync(p unsafe.Pointer, src DevicePtr, dst unsafe.Pointer, n uintptr) error {
	return takeError(C.go_tf_download_async(crt(p), C.uint64_t(src), dst, C.size_t(n)))
}

func uploadAsync(p, src unsafe.Pointer, dst DevicePtr, n uintptr) error {
	return takeError(C.go_tf_upload_async(crt(p), src, C.uint64_t(dst), C.size_t(n)))
}
