// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

const (
	goroutines = 64
	rounds     = 300
)

// migrations counts, across goroutines, how often a goroutine was seen on a
// different OS thread than at its previous look.  The tests below prove
// nothing unless this is nonzero, so they fail when it stays 0.
type migrations struct{ n atomic.Int64 }

func (m *migrations) look(last *int) {
	tid := syscall.Gettid()
	if *last != 0 && *last != tid {
		m.n.Add(1)
	}
	*last = tid
}

func (m *migrations) require(t *testing.T) {
	t.Helper()
	if m.n.Load() == 0 {
		t.Fatal("no goroutine ever changed OS thread: the test proved nothing")
	}
	t.Logf("goroutines changed OS thread %d times", m.n.Load())
}

// failures counts what went wrong on many goroutines and keeps the first.
type failures struct {
	n     atomic.Int64
	first atomic.Value
}

func (f *failures) add(format string, args ...interface{}) {
	if f.n.Add(1) == 1 {
		f.first.Store(fmt.Sprintf(format, args...))
	}
}

func (f *failures) require(t *testing.T, what string) {
	t.Helper()
	if n := f.n.Load(); n != 0 {
		t.Fatalf("%d %s; first: %v", n, what, f.first.Load())
	}
}

// hammer runs `goroutines` goroutines over more OS threads than the
// machine has cores; each calls start(g) once, then the round it returns
// `rounds` times, yielding now and then, then done (if not nil).  It fails
// the test unless some goroutine changed OS thread on the way.
func hammer(t *testing.T, start func(g int) (round func(k int), done func())) {
	t.Helper()
	old := runtime.GOMAXPROCS(8)
	defer runtime.GOMAXPROCS(old)
	var moved migrations
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			round, done := start(g)
			if done != nil {
				defer done()
			}
			tid := 0
			for k := 0; round != nil && k < rounds; k++ {
				moved.look(&tid)
				round(k)
				if k%16 == 0 {
					runtime.Gosched()
				}
			}
		}(g)
	}
	wg.Wait()
	moved.require(t)
}

// failureCase makes one call fail with a value unique to (goroutine,
// round) and says what the error must start with, and what else it must
// contain after that (a "|" separates the two).
type failureCase func(g, k, bad int) (error, string)

// failureCases are calls of every kind that fail on the calling thread:
// plain queries, constructors, transfers, slot work and cuBLAS callbacks.
func failureCases(rt *tenferro.Runtime, host []byte, withCublas bool) []failureCase {
	cases := []failureCase{
		func(g, k, bad int) (error, string) {
			_, err := rt.SlotStream(bad)
			return err, fmt.Sprintf("tf_runtime_slot_stream: slot %d is outside", bad)
		},
		func(g, k, bad int) (error, string) {
			_, err := tenferro.NewRuntimeWithOptions(0, tenferro.Options{StreamSlots: bad, RetirementCapacity: 1})
			return err, fmt.Sprintf("tf_runtime_new_with_options: stream_slots %d is outside", bad)
		},
		func(g, k, bad int) (error, string) {
			// A host address (unique to the goroutine and round) is not
			// device memory.
			addr := tenferro.DevicePtr(uintptr(unsafe.Pointer(&host[k])))
			_, err := tenferro.DownloadScalar[uint8](rt, addr)
			return err, fmt.Sprintf("tf_download_scalar: src %v is not device memory", addr)
		},
		func(g, k, bad int) (error, string) {
			addr := tenferro.DevicePtr(uintptr(unsafe.Pointer(&host[k])))
			return tenferro.Upload(rt, addr, host[:1]), fmt.Sprintf("tf_upload: dst %v is not device memory", addr)
		},
		func(g, k, bad int) (error, string) {
			return rt.SlotWait(bad), fmt.Sprintf("tf_slot_wait: other_slot %d is outside", bad)
		},
	}
	if withCublas {
		cases = append(cases, func(g, k, bad int) (error, string) {
			err := rt.CublasEnqueue(tenferro.PointerModeHost, func(*tenferro.Cublas) error {
				return tenferro.CublasStatus(bad)
			})
			// cuBLAS names an unknown status its own way: only the number is ours.
			return err, fmt.Sprintf("tf_cublas_enqueue: cuBLAS callback failed: |(%d): ", bad)
		})
	}
	return cases
}

// Every goroutine's failures carry its own values, although all of them
// fail on shared OS threads between which they keep moving: the error is
// copied in the same cgo call as the failing function, for every kind of
// call.
func TestErrorsFollowTheirGoroutine(t *testing.T) {
	rt := newRuntime(t, 4)
	defer closeRuntime(t, rt)
	cublas, err := rt.Supports(tenferro.CapCUBLAS)
	must(t, err)
	var wrong failures
	var seen [8]atomic.Int64
	hammer(t, func(g int) (func(int), func()) {
		host := make([]byte, rounds+1) // its addresses are this goroutine's own
		cases := failureCases(rt, host, cublas)
		return func(k int) {
			bad := 1000 + g*rounds + k // unique to this goroutine and round
			which := (g + k) % len(cases)
			err, want := cases[which](g, k, bad)
			seen[which].Add(1)
			prefix, rest, _ := strings.Cut(want, "|")
			if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), rest) {
				wrong.add("goroutine %d round %d: got %v, want %q...", g, k, err, want)
			}
			// Successful calls in between leave the thread's record alone;
			// other goroutines' failures on this thread overwrite it.
			if err := rt.Sync(); err != nil {
				wrong.add("goroutine %d round %d: Sync: %v", g, k, err)
			}
		}, nil
	})
	wrong.require(t, "errors belonged to another goroutine or call")
	for i := range failureCases(rt, nil, cublas) {
		if seen[i].Load() == 0 {
			t.Fatalf("failure case %d never ran", i)
		}
	}
}

// A Runtime from BindSlot uses its slot from whatever thread the goroutine
// runs on, for every call that uses a slot: its stream, the stream a
// StreamEnqueue or CublasEnqueue callback gets, the staging a download
// uses (each goroutine reads back what it wrote), retirements, Sync.  The
// unbound Runtime's slot follows the thread.
func TestBoundSlotsStayPutAcrossThreads(t *testing.T) {
	const slots = 4
	rt := newRuntime(t, slots)
	defer closeRuntime(t, rt)
	cublas, err := rt.Supports(tenferro.CapCUBLAS)
	must(t, err)
	var streams [slots]unsafe.Pointer
	for s := range streams {
		var err error
		if streams[s], err = rt.SlotStream(s); err != nil {
			t.Fatal(err)
		}
	}
	var wrong failures
	var unboundSlots sync.Map
	var released atomic.Int64
	hammer(t, func(g int) (func(int), func()) {
		slot := g % slots
		bound, err := rt.BindSlot(slot)
		if err != nil {
			wrong.add("BindSlot(%d): %v", slot, err)
			return nil, nil
		}
		cell, err := tenferro.NewBuffer[uint32](bound, 1)
		if err != nil {
			wrong.add("NewBuffer: %v", err)
			return nil, func() { bound.Close() }
		}
		check := func(what string, got unsafe.Pointer, err error) {
			if err != nil || got != streams[slot] {
				wrong.add("goroutine %d bound to %d: %s stream %v (want %v), %v", g, slot, what, got, streams[slot], err)
			}
		}
		return func(k int) {
			got, err := bound.CurrentSlot()
			if err != nil || got != slot {
				wrong.add("goroutine %d bound to %d: CurrentSlot %d, %v", g, slot, got, err)
			}
			stream, err := bound.Stream()
			check("Stream", stream, err)
			var seen unsafe.Pointer
			err = bound.StreamEnqueue(func(s unsafe.Pointer) error { seen = s; return nil })
			check("StreamEnqueue", seen, err)
			if cublas && k%8 == 0 {
				err = bound.CublasEnqueue(tenferro.PointerModeHost, func(c *tenferro.Cublas) error { seen = c.Stream; return nil })
				check("CublasEnqueue", seen, err)
			}
			value := uint32(g*rounds + k)
			err = cell.Upload([]uint32{value})
			back, err2 := tenferro.DownloadScalar[uint32](bound, cell.Ptr())
			if err != nil || err2 != nil || back != value {
				wrong.add("goroutine %d: wrote %d, read %d back (%v, %v)", g, value, back, err, err2)
			}
			if k%32 == 0 {
				if err := bound.Retire(func() { released.Add(1) }); err != nil {
					wrong.add("goroutine %d: Retire: %v", g, err)
				}
			}
			if err := bound.Sync(); err != nil {
				wrong.add("goroutine %d: Sync: %v", g, err)
			}
			if s, err := rt.CurrentSlot(); err == nil {
				unboundSlots.Store(s, true)
			}
		}, func() { cell.Free(); bound.Close() }
	})
	wrong.require(t, "calls of bound handles left their slot")
	// Every goroutine's retirements were on its own slot, which its Sync
	// waited for: all of them ran.
	if want := int64(goroutines * ((rounds + 31) / 32)); released.Load() != want {
		t.Fatalf("%d of %d retirements released", released.Load(), want)
	}
	seen := 0
	unboundSlots.Range(func(_, _ interface{}) bool { seen++; return true })
	t.Logf("the unbound Runtime answered %d different slots to the same goroutines", seen)
	if double != nil {
		if n := double.Calls("cuStreamCreate"); n != slots {
			t.Fatalf("%d streams created for %d slots", n, slots)
		}
	}
}
