// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"errors"
	"unsafe"
)

// MemoryStats is a consistent snapshot of the counters of a device's
// memory pool (tf_memory_pool_stats), the pool Alloc and NewBuffer take
// device memory from.  The pool and its counters are the device's, shared
// by every runtime of the device in the process.  Every snapshot has
// InUseBytes <= ReservedBytes <= ReservedPeak, InUseBytes <= InUsePeak, and
// Allocations-Frees live allocations whose sizes add up to InUseBytes.
type MemoryStats struct {
	Cached           bool   // from the library's pool; false: uncached (cuMemAlloc), the device has no pools
	ReservedBytes    uint64 // device memory the pool holds from the driver (uncached: in use)
	ReservedPeak     uint64 // most reserved since the pool was made or ResetPeakMemoryStats
	InUseBytes       uint64 // live allocations, in the bytes asked for
	InUsePeak        uint64 // most in use since the pool was made or ResetPeakMemoryStats
	Allocations      uint64 // Alloc calls that allocated
	Frees            uint64 // Free calls that freed one of them
	OOMRetries       uint64 // allocations retried after the pool gave its cached memory back
	OOMFailures      uint64 // retries that failed anyway (StatusOutOfMemory)
	Trims            uint64 // give-backs: TrimMemory and retries
	ReleaseThreshold uint64 // the pool's Options.MemoryReleaseThreshold
	ReservedLimit    uint64 // the pool's Options.MemoryReservedLimit, 0 for none
}

// MemoryStats returns the counters of the memory pool of the runtime's
// device (tf_memory_stats), the same through every runtime of the device.
// It waits only for allocations and frees in progress, never for the
// device.  A library older than 1.2 gives StatusNotSupported
// (ErrLibraryTooOld), as for every call of this file.
func (r *Runtime) MemoryStats() (s MemoryStats, err error) {
	err = r.do("tf_memory_stats", func(p unsafe.Pointer) error {
		s, err = memoryStats(p)
		return err
	})
	return s, err
}

// ResetPeakMemoryStats restarts the peaks of MemoryStats (ReservedPeak,
// InUsePeak) at the current values (tf_memory_reset_peak), like
// torch.cuda.reset_peak_memory_stats().
func (r *Runtime) ResetPeakMemoryStats() error {
	return r.do("tf_memory_reset_peak", memoryResetPeak)
}

// TrimMemory gives the unused memory of the device's pool back to the
// driver until the pool holds at most keepBytes of it (tf_memory_trim,
// cuMemPoolTrimTo), like torch.cuda.empty_cache(); memory in use stays.
// It first waits for the work queued on every slot of every runtime of the
// device, so that their frees count.  Uncached there is nothing to give
// back.
func (r *Runtime) TrimMemory(keepBytes uint64) error {
	return r.do("tf_memory_trim", func(p unsafe.Pointer) error { return memoryTrim(p, keepBytes) })
}

// RecordUse notes that the runtime's current slot (a Stream's own) uses
// the allocation that holds p (tf_memory_record_use, like PyTorch's
// Tensor.record_stream()): call it after queueing that work.  A later Free
// of that memory from another slot, of any runtime of the device, then
// waits on the device for the work this slot queued before the Free, so
// the pool never hands the memory out under it.  p must lie inside a live
// allocation of the device (else StatusInvalidArgument).  Buffer.RecordUse
// is the typed form; Launch records its Buffer arguments itself.
func (r *Runtime) RecordUse(p DevicePtr) error {
	return r.do("tf_memory_record_use", func(rt unsafe.Pointer) error { return memoryRecordUse(rt, p) })
}

// RecordUse notes that work queued on q's slot by hand (Launch with the
// buffer's Ptr, a CublasEnqueue or StreamEnqueue callback, Upload or Copy
// on raw addresses) uses the buffer, so that its Free, in order on its own
// Queue's slot, waits on the device for the work q queued before the Free
// (Runtime.RecordUse).  Call it after queueing that work; once per Queue is
// enough.  An empty buffer has nothing to record.
func (b *Buffer[T]) RecordUse(q Queue) error {
	if b.ptr == 0 {
		return nil
	}
	return runtimeOf(q).RecordUse(b.ptr)
}

// deviceOperand is a kernel argument that is device memory of a Buffer:
// its address, and the Runtime (Queue) its Free is ordered on.
type deviceOperand interface {
	operand() (DevicePtr, *Runtime)
}

func (b *Buffer[T]) operand() (DevicePtr, *Runtime) { return b.ptr, b.rt }

// recordUses records, after r queued work on them, the operands freed
// through another handle: of another slot, or of a Runtime whose slot is
// the calling thread's.  One freed through r itself needs none (the free
// is in order after the work); the library skips a record of the freeing
// slot's own.  A library older than 1.2 records nothing.
func (r *Runtime) recordUses(operands []deviceOperand) error {
	for _, o := range operands {
		p, owner := o.operand()
		if p == 0 || owner == r {
			continue
		}
		if err := r.RecordUse(p); errors.Is(err, ErrLibraryTooOld) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}
