// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

// #include "shim.h"
import "C"

import "unsafe"

// The device's memory pool: optional (1.2) entries of the table, whose
// wrappers report a library that lacks them.

func memoryStats(p unsafe.Pointer) (MemoryStats, error) {
	var s C.tf_memory_pool_stats
	err := takeError(C.go_tf_memory_pool_stats_init(&s, C.size_t(unsafe.Sizeof(s))))
	if err == nil { // a 1.1 library lacks the init: its error names it
		err = takeError(C.go_tf_memory_stats(crt(p), &s))
	}
	if err != nil {
		return MemoryStats{}, err
	}
	return MemoryStats{
		Cached:           s.cached != 0,
		ReservedBytes:    uint64(s.reserved_bytes),
		ReservedPeak:     uint64(s.reserved_peak),
		InUseBytes:       uint64(s.in_use_bytes),
		InUsePeak:        uint64(s.in_use_peak),
		Allocations:      uint64(s.allocations),
		Frees:            uint64(s.frees),
		OOMRetries:       uint64(s.oom_retries),
		OOMFailures:      uint64(s.oom_failures),
		Trims:            uint64(s.trims),
		ReleaseThreshold: uint64(s.release_threshold),
		ReservedLimit:    uint64(s.reserved_limit),
	}, nil
}

func memoryResetPeak(p unsafe.Pointer) error { return takeError(C.go_tf_memory_reset_peak(crt(p))) }

func memoryTrim(p unsafe.Pointer, keep uint64) error {
	return takeError(C.go_tf_memory_trim(crt(p), C.uint64_t(keep)))
}

func memoryRecordUse(p unsafe.Pointer, ptr DevicePtr) error {
	return takeError(C.go_tf_memory_record_use(crt(p), C.uint64_t(ptr)))
}
