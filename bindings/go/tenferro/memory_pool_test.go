// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"strings"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/internal/testsupport"
	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

const mib = 1 << 20

// consistent checks what every snapshot satisfies (tf_memory_pool_stats).
func consistent(t *testing.T, s tenferro.MemoryStats) {
	t.Helper()
	if s.InUseBytes > s.ReservedBytes || s.ReservedBytes > s.ReservedPeak || s.InUseBytes > s.InUsePeak || s.Frees > s.Allocations {
		t.Fatalf("an inconsistent snapshot: %+v", s)
	}
}

func memoryStats(t *testing.T, r *tenferro.Runtime) tenferro.MemoryStats {
	t.Helper()
	s, err := r.MemoryStats()
	must(t, err)
	consistent(t, s)
	return s
}

func TestMemoryStatsCountAllocationsPeaksAndTrims(t *testing.T) {
	rt := newRuntime(t, 4)
	t.Cleanup(func() { closeRuntime(t, rt) })
	s0 := bind(t, rt, 0)
	before := memoryStats(t, rt)
	if before.ReleaseThreshold != tenferro.DefaultMemoryReleaseThreshold || before.ReservedLimit != 0 {
		t.Fatalf("the default options: %+v", before)
	}
	big, err := tenferro.NewBuffer[byte](s0, mib)
	must(t, err)
	small, err := tenferro.NewBuffer[uint32](s0, 1024)
	must(t, err)
	defer small.Free()
	s := memoryStats(t, rt)
	pooled, err := rt.Supports(tenferro.CapStreamOrderedAlloc)
	must(t, err)
	if s.Cached != pooled || s.InUseBytes != before.InUseBytes+mib+4096 ||
		s.Allocations != before.Allocations+2 || s.Frees != before.Frees {
		t.Fatalf("after two allocations: %+v (before %+v)", s, before)
	}
	must(t, big.Free())
	must(t, s0.Sync())
	after := memoryStats(t, rt)
	if after.InUseBytes != s.InUseBytes-mib || after.Frees != s.Frees+1 || after.InUsePeak < s.InUseBytes {
		t.Fatalf("after a free: %+v (before %+v)", after, s)
	}
	// The counters are the device's: the same through every runtime of it.
	other, err := tenferro.NewRuntime(0)
	must(t, err)
	if o := memoryStats(t, other); o != after {
		t.Fatalf("another runtime of the device reads %+v, this one %+v", o, after)
	}
	must(t, other.Close())
	must(t, rt.ResetPeakMemoryStats())
	reset := memoryStats(t, rt)
	if reset.InUsePeak != reset.InUseBytes || reset.ReservedPeak != reset.ReservedBytes {
		t.Fatalf("after ResetPeakMemoryStats: %+v", reset)
	}
	must(t, rt.TrimMemory(0))
	trimmed := memoryStats(t, rt)
	want := reset.Trims
	if trimmed.Cached {
		want++
	}
	if trimmed.Trims != want || trimmed.ReservedBytes > reset.ReservedBytes {
		t.Fatalf("after TrimMemory(0): %+v (before %+v)", trimmed, reset)
	}
	if double != nil && trimmed.ReservedBytes != trimmed.InUseBytes {
		t.Fatalf("the double's pool keeps nothing after a trim: %+v", trimmed)
	}
}

// A device without memory pools allocates uncached: the stats say so,
// TrimMemory has nothing to give back and RecordUse only checks its address.
func TestWithoutMemoryPoolsTheStatsSayUncached(t *testing.T) {
	d := requireDouble(t)
	d.SetAttribute(0, testsupport.AttributeMemoryPoolsSupported, 0)
	t.Cleanup(d.Reset)
	rt, err := tenferro.NewRuntime(0) // not newRuntime: its Reset would forget the attribute
	must(t, err)
	t.Cleanup(func() { closeRuntime(t, rt) })
	buf, err := tenferro.NewBuffer[byte](rt, 4096)
	must(t, err)
	defer buf.Free()
	s := memoryStats(t, rt)
	if s.Cached || s.InUseBytes != 4096 || s.ReservedBytes != s.InUseBytes {
		t.Fatalf("uncached: %+v", s)
	}
	must(t, rt.TrimMemory(0))
	if s := memoryStats(t, rt); s.Trims != 0 {
		t.Fatalf("an uncached trim counted a give-back: %+v", s)
	}
	must(t, buf.RecordUse(bind(t, rt, 1)))
}

// The memory options reach the device's pool, which every runtime of the
// device shares: another value is refused while it lives, 0 takes its own,
// the limit holds (a retry, then StatusOutOfMemory), and once the device's
// runtimes are gone a new pool takes new options.
func TestMemoryOptionsReachTheDevicesPool(t *testing.T) {
	requireDevice(t)
	withLimit := func(limit uint64) tenferro.Options {
		o := tenferro.DefaultOptions()
		o.MemoryReservedLimit = limit
		return o
	}
	o := withLimit(64 * mib)
	o.MemoryReleaseThreshold = mib
	rt, err := tenferro.NewRuntimeWithOptions(0, o)
	must(t, err)
	t.Cleanup(func() { rt.Close() })
	if pooled, err := rt.Supports(tenferro.CapStreamOrderedAlloc); err != nil || !pooled {
		t.Skipf("the device has no memory pools (%v): its options are not shown", err)
	}
	if s := memoryStats(t, rt); s.ReleaseThreshold != mib || s.ReservedLimit != 64*mib {
		t.Fatalf("the pool's options: %+v", s)
	}
	_, err = tenferro.NewRuntimeWithOptions(0, withLimit(128*mib))
	asError(t, err, tenferro.StatusInvalidArgument, "tf_runtime_new_with_options",
		"memory_reserved_limit 134217728 differs from the 67108864")
	same, err := tenferro.NewRuntimeWithOptions(0, tenferro.DefaultOptions())
	must(t, err)
	if s := memoryStats(t, same); s.ReservedLimit != 64*mib {
		t.Fatalf("a runtime leaving the limit 0 sees %+v", s)
	}
	must(t, same.Close())
	s0 := bind(t, rt, 0)
	six, err := tenferro.NewBuffer[byte](s0, 48*mib)
	must(t, err)
	_, err = tenferro.NewBuffer[byte](s0, 32*mib)
	asError(t, err, tenferro.StatusOutOfMemory, "tf_alloc", "memory_reserved_limit")
	if s := memoryStats(t, rt); s.OOMRetries != 1 || s.OOMFailures != 1 {
		t.Fatalf("past the limit: %+v, want one retry that failed", s)
	}
	must(t, six.Free())
	must(t, s0.Close())
	must(t, rt.Close())
	_, err = tenferro.NewRuntimeWithOptions(0, withLimit(4096))
	asError(t, err, tenferro.StatusInvalidArgument, "tf_runtime_new_with_options", "below TF_MIN_MEMORY_RESERVED_LIMIT")
	fresh, err := tenferro.NewRuntimeWithOptions(0, withLimit(128*mib))
	must(t, err)
	defer fresh.Close()
	if s := memoryStats(t, fresh); s.ReservedLimit != 128*mib {
		t.Fatalf("a new pool after the last runtime went: %+v", s)
	}
}

func TestRecordUseChecksItsAddress(t *testing.T) {
	rt := newRuntime(t, 2)
	t.Cleanup(func() { closeRuntime(t, rt) })
	s0, s1 := bind(t, rt, 0), bind(t, rt, 1)
	buf, err := tenferro.NewBuffer[uint64](s0, 8)
	must(t, err)
	defer buf.Free()
	must(t, buf.RecordUse(s1))
	must(t, s1.RecordUse(buf.Ptr().Add(63))) // inside: its last byte
	empty, err := tenferro.NewBuffer[byte](s0, 0)
	must(t, err)
	must(t, empty.RecordUse(s1)) // nothing to record
	asError(t, rt.RecordUse(0), tenferro.StatusInvalidArgument, "tf_memory_record_use")
	e := asError(t, s1.RecordUse(buf.Ptr().Add(64)), tenferro.StatusInvalidArgument, "tf_memory_record_use")
	if !strings.Contains(e.Message, "is not inside a live tf_alloc() allocation") {
		t.Fatalf("one past the end: %q", e.Message)
	}
	asError(t, buf.RecordUse(nil), tenferro.StatusInvalidHandle, "tf_memory_record_use")
}
