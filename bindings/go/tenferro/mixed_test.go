// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// Many goroutines, each on its own bound Runtime, doing every kind of work
// at once on shared slots of one runtime: GEMMs checked against the CPU,
// compiled kernels, bulk and scalar transfers, device copies, events
// between goroutines' slots, retirements.  Every result is checked.
func TestManyGoroutinesMixedWork(t *testing.T) {
	const (
		workers = 24
		slots   = 6
		steps   = 12
	)
	rt := newRuntime(t, slots)
	defer closeRuntime(t, rt)
	cublas, err := rt.Supports(tenferro.CapCUBLAS)
	must(t, err)
	nvrtc, err := rt.Supports(tenferro.CapRuntimeCompilation)
	must(t, err)
	var add *tenferro.Function
	if nvrtc {
		m, f := compileAdd(t, rt)
		defer m.Close()
		add = f
	}
	old := runtime.GOMAXPROCS(8)
	defer runtime.GOMAXPROCS(old)
	var wrong failures
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			bound, err := rt.BindSlot(w % slots)
			if err != nil {
				wrong.add("worker %d: BindSlot: %v", w, err)
				return
			}
			defer bound.Close()
			for s := 0; s < steps; s++ {
				if err := mixedStep(bound, add, cublas, w, s); err != nil {
					wrong.add("worker %d step %d: %v", w, s, err)
					return
				}
			}
			if err := bound.Sync(); err != nil {
				wrong.add("worker %d: Sync: %v", w, err)
			}
		}(w)
	}
	wg.Wait()
	wrong.require(t, "workers got wrong results or errors")
	t.Logf("%d workers x %d steps on %d slots (cuBLAS %v, NVRTC %v)", workers, steps, slots, cublas, nvrtc)
}

// mixedStep does one kind of work, chosen by worker and step, and checks it.
func mixedStep(rt *tenferro.Runtime, add *tenferro.Function, cublas bool, w, s int) error {
	seed := int64(w*1000 + s)
	switch (w + s) % 5 {
	case 0:
		if !cublas {
			return nil
		}
		g := newGemmCase(seed, tenferro.Operation(s%2), tenferro.OpN, 24+w%8, 17, 33)
		return checkGemm(rt, g, s%3 == 0)
	case 1:
		if add == nil {
			return nil
		}
		return checkAdd(rt, add, 500+w*37, seed)
	case 2:
		// Big enough for the pipelined staging: several workers' downloads
		// share the runtime's copy threads.
		return checkCopyRoundTrip(rt, 300000+w*1000, seed)
	case 3:
		return checkEventHandOff(rt, seed)
	default:
		b, err := tenferro.BufferFrom(rt, []float64{float64(seed)})
		if err != nil {
			return err
		}
		v, err := tenferro.DownloadScalar[float64](rt, b.Ptr())
		if err != nil || v != float64(seed) {
			return fmt.Errorf("DownloadScalar %v, %v; want %d", v, err, seed)
		}
		return rt.Retire(func() { b.Free() }) // freed once the slot passed the download
	}
}

func checkGemm(rt *tenferro.Runtime, g gemmCase, double bool) error {
	want := g.want()
	var got []float64
	var err error
	if double {
		got, err = gemmOnDevice[float64](rt, g, false)
	} else {
		got, err = gemmOnDevice[float32](rt, g, true)
	}
	if err != nil {
		return err
	}
	if i, ok := closeTo(got, want, 1e-5); !ok {
		return fmt.Errorf("GEMM element %d: %v, the CPU's %v", i, got[i], want[i])
	}
	return nil
}

func checkAdd(rt *tenferro.Runtime, f *tenferro.Function, n int, seed int64) error {
	xs, ys := randomFloats(seed, n), randomFloats(seed+1, n)
	x, err := tenferro.BufferFrom(rt, xs)
	if err != nil {
		return err
	}
	defer x.Free()
	y, err := tenferro.BufferFrom(rt, ys)
	if err != nil {
		return err
	}
	defer y.Free()
	if err := rt.Launch(f, tenferro.Blocks1D(n, 128), x.Ptr(), y.Ptr(), y.Ptr(), uint32(n)); err != nil {
		return err
	}
	got, err := y.ToSlice()
	if err != nil {
		return err
	}
	for i := range got {
		if got[i] != xs[i]+ys[i] {
			return fmt.Errorf("kernel: y[%d] = %v, want %v", i, got[i], xs[i]+ys[i])
		}
	}
	return nil
}

func checkCopyRoundTrip(rt *tenferro.Runtime, n int, seed int64) error {
	src := randomFloats(seed, n)
	x, err := tenferro.BufferFrom(rt, src)
	if err != nil {
		return err
	}
	defer x.Free()
	y, err := tenferro.NewBuffer[float32](rt, n)
	if err != nil {
		return err
	}
	defer y.Free()
	if err := rt.Copy(y.Ptr(), x.Ptr(), 4*n); err != nil {
		return err
	}
	got, err := y.ToSlice()
	if err != nil {
		return err
	}
	for i := range got {
		if got[i] != src[i] {
			return fmt.Errorf("copy: element %d of %d is %v, want %v", i, n, got[i], src[i])
		}
	}
	return nil
}

// checkEventHandOff writes on the worker's slot, hands the data to the
// next slot through an event, and reads it there.
func checkEventHandOff(rt *tenferro.Runtime, seed int64) error {
	slot, err := rt.CurrentSlot()
	if err != nil {
		return err
	}
	count, err := rt.SlotCount()
	if err != nil {
		return err
	}
	next, err := rt.BindSlot((slot + 1) % count)
	if err != nil {
		return err
	}
	defer next.Close()
	src := randomFloats(seed, 70000)
	x, err := tenferro.BufferFrom(rt, src)
	if err != nil {
		return err
	}
	ev, err := rt.NewEvent()
	if err != nil {
		return err
	}
	defer ev.Close()
	// The allocation and upload are ordered on this slot; the event carries
	// them to the next.
	if err := rt.RecordEvent(ev); err != nil {
		return err
	}
	if err := next.WaitEvent(ev); err != nil {
		return err
	}
	got := make([]float32, len(src))
	if err := tenferro.Download(next, got, x.Ptr()); err != nil {
		return err
	}
	for i := range got {
		if got[i] != src[i] {
			return fmt.Errorf("after the event: element %d is %v, want %v", i, got[i], src[i])
		}
	}
	// Free on the slot that last used it, after its download.
	return next.Free(x.Ptr())
}
