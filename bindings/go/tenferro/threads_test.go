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

// Every goroutine's failures carry its own values, although all of them
// fail on shared OS threads between which they keep moving: the error is
// copied in the same cgo call as the failing function.
func TestErrorsFollowTheirGoroutine(t *testing.T) {
	rt := newRuntime(t, 4)
	defer closeRuntime(t, rt)
	var wrong failures
	hammer(t, func(g int) (func(int), func()) {
		return func(k int) {
			bad := 1000 + g*rounds + k // unique to this goroutine and round
			var err error
			var want string
			if k%2 == 0 {
				_, err = rt.SlotStream(bad)
				want = fmt.Sprintf("tf_runtime_slot_stream: slot %d is outside", bad)
			} else {
				_, err = tenferro.NewRuntimeWithOptions(0, tenferro.Options{StreamSlots: bad, RetirementCapacity: 1})
				want = fmt.Sprintf("tf_runtime_new: stream_slots %d is outside", bad)
			}
			if err == nil || !strings.HasPrefix(err.Error(), want) {
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
}

// A Runtime from BindSlot uses its slot from whatever thread the goroutine
// runs on; the unbound Runtime's slot follows the thread.
func TestBoundSlotsStayPutAcrossThreads(t *testing.T) {
	const slots = 4
	rt := newRuntime(t, slots)
	defer closeRuntime(t, rt)
	var streams [slots]unsafe.Pointer
	for s := range streams {
		var err error
		if streams[s], err = rt.SlotStream(s); err != nil {
			t.Fatal(err)
		}
	}
	var wrong failures
	var unboundSlots sync.Map
	hammer(t, func(g int) (func(int), func()) {
		slot := g % slots
		bound, err := rt.BindSlot(slot)
		if err != nil {
			wrong.add("BindSlot(%d): %v", slot, err)
			return nil, nil
		}
		return func(k int) {
			got, err1 := bound.CurrentSlot()
			stream, err2 := bound.Stream()
			err3 := bound.Sync()
			if err1 != nil || err2 != nil || err3 != nil || got != slot || stream != streams[slot] {
				wrong.add("goroutine %d bound to %d: slot %d stream %v (want %v) errors %v %v %v",
					g, slot, got, stream, streams[slot], err1, err2, err3)
			}
			if s, err := rt.CurrentSlot(); err == nil {
				unboundSlots.Store(s, true)
			}
		}, func() { bound.Close() }
	})
	wrong.require(t, "calls of bound handles left their slot")
	seen := 0
	unboundSlots.Range(func(_, _ interface{}) bool { seen++; return true })
	t.Logf("the unbound Runtime answered %d different slots to the same goroutines", seen)
	if double != nil {
		if n := double.Calls("cuStreamCreate"); n != slots {
			t.Fatalf("%d streams created for %d slots", n, slots)
		}
	}
}
