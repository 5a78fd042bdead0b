// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"io"
	"reflect"
	"sync"
	"testing"
	"unsafe"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// Every object that owns memory or a reference is an io.Closer.
var (
	_ io.Closer = (*tenferro.HostBuffer)(nil)
	_ io.Closer = (*tenferro.Registration)(nil)
	_ io.Closer = (*tenferro.HostMemory)(nil)
	_ io.Closer = (*tenferro.Buffer[float32])(nil)
	_ io.Closer = (*tenferro.Runtime)(nil)
	_ io.Closer = (*tenferro.Stream)(nil)
	_ io.Closer = (*tenferro.Event)(nil)
	_ io.Closer = (*tenferro.Graph)(nil)
)

// Closing through io.Closer gives everything back, and a second Close of
// the memory types does nothing.
func TestMemoryClosesThroughIOCloser(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	h, err := rt.HostAlloc(64)
	must(t, err)
	mem, err := tenferro.MapHostMemory(4096)
	must(t, err)
	reg, err := rt.HostRegister(mem.Ptr(), mem.Len())
	must(t, err)
	buf, err := tenferro.NewBuffer[float32](rt, 16)
	must(t, err)
	for _, c := range []io.Closer{h, reg, mem, buf} { // the Registration before its memory
		must(t, c.Close())
		must(t, c.Close())
	}
	if st := hostStats(t, rt); st.BlocksInUse != 0 || st.BytesRegistered != 0 {
		t.Fatalf("after closing everything: %+v", st)
	}
	if h.Ptr() != nil || reg.Ptr() != nil || mem.Ptr() != nil || buf.Ptr() != 0 {
		t.Fatal("a closed object still has its memory")
	}
}

// A block lent by With stays out of the pool until With returns, whoever
// closes it meanwhile: the next HostAlloc gets another block, HostTrim
// leaves it mapped, and the With that returns last gives it back.
func TestWithKeepsTheBlockUntilItReturns(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	h, err := rt.HostAlloc(4096)
	must(t, err)
	first := h.Ptr()
	err = h.With(func(b []byte) {
		must(t, h.Close()) // from inside: carried out when With returns
		if h.Ptr() != nil || h.UnsafeBytes() != nil {
			t.Error("a HostBuffer closed inside With still gives out views")
		}
		other, err := rt.HostAlloc(4096)
		must(t, err)
		if other.Ptr() == first {
			t.Error("the pool handed out the block With still lends")
		}
		must(t, other.Close())
		must(t, rt.HostTrim())
		b[len(b)-1] = 1 // still mapped
		if st := hostStats(t, rt); st.BlocksInUse != 1 {
			t.Errorf("inside With after Close: %+v, want the block still in use", st)
		}
	})
	must(t, err)
	if st := hostStats(t, rt); st.BlocksInUse != 0 || st.BlocksCached != 1 {
		t.Fatalf("after With returned: %+v, want the block back in the pool", st)
	}
}

// A Close on another goroutine returns at once; the With running gives the
// block back when it returns.  With and Close race safely (go test -race).
func TestCloseWhileAnotherGoroutineIsInsideWith(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	for round := 0; round < 50; round++ {
		h, err := rt.HostAlloc(256)
		must(t, err)
		inside, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.With(func(b []byte) {
				close(inside)
				<-release
				b[0] = byte(round)
			}); err != nil {
				t.Errorf("With: %v", err)
			}
		}()
		<-inside
		must(t, h.Close())
		if st := hostStats(t, rt); st.BlocksInUse != 1 {
			t.Fatalf("round %d: Close during another goroutine's With: %+v, want the block in use", round, st)
		}
		close(release)
		wg.Wait()
		if st := hostStats(t, rt); st.BlocksInUse != 0 {
			t.Fatalf("round %d: after With returned: %+v", round, st)
		}
	}
}

// A panic in fn still ends the With: a Close made inside is carried out.
func TestWithEndsWhenItsFunctionPanics(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	h, err := rt.HostAlloc(64)
	must(t, err)
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Fatalf("recovered %v, want the function's panic", v)
			}
		}()
		h.With(func([]byte) {
			h.Close()
			panic("boom")
		})
	}()
	if st := hostStats(t, rt); st.BlocksInUse != 0 {
		t.Fatalf("after a panicking With that closed the block: %+v", st)
	}
}

// HostRegister takes an unsafe.Pointer and a length: a Go slice
// (HostRegister(make([]byte, n)), which cgo forbids the library to keep)
// does not compile.
func TestHostRegisterTakesNoGoSlice(t *testing.T) {
	m, ok := reflect.TypeOf((*tenferro.Runtime)(nil)).MethodByName("HostRegister")
	if !ok {
		t.Fatal("Runtime has no HostRegister")
	}
	in := m.Type
	if in.NumIn() != 3 || in.In(1) != reflect.TypeOf(unsafe.Pointer(nil)) || in.In(2) != reflect.TypeOf(0) {
		t.Fatalf("HostRegister is %v, want func(*Runtime, unsafe.Pointer, int) ...", in)
	}
	if reflect.TypeOf([]byte(nil)).AssignableTo(in.In(1)) {
		t.Fatal("a []byte is assignable to HostRegister's memory")
	}
}

// MapHostMemory is zeroed, page-aligned memory that HostRegister takes;
// its Close refuses while a Registration covers it, so the registered
// memory cannot be unmapped under the device.
func TestHostMemoryOutlivesItsRegistrations(t *testing.T) {
	rt := newRuntime(t, 1)
	defer closeRuntime(t, rt)
	mem, err := tenferro.MapHostMemory(10000)
	must(t, err)
	if mem.Len() != 10000 || uintptr(mem.Ptr())%4096 != 0 {
		t.Fatalf("MapHostMemory(10000): Len %d at %p", mem.Len(), mem.Ptr())
	}
	must(t, mem.With(func(b []byte) {
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("byte %d of new HostMemory is %d", i, b[i])
			}
		}
	}))
	reg, err := rt.HostRegister(unsafe.Add(mem.Ptr(), 4096), 4096) // part of it
	must(t, err)
	asError(t, mem.Close(), tenferro.StatusInvalidArgument, "munmap", "registered", "close the Registration first")
	mem.UnsafeBytes()[4096] = 7 // still mapped
	must(t, reg.Close())
	must(t, mem.Close())
	must(t, mem.Close())
	if mem.Ptr() != nil || mem.UnsafeBytes() != nil || mem.Len() != 0 {
		t.Fatal("a closed HostMemory still has its memory")
	}
	asError(t, mem.With(func([]byte) {}), tenferro.StatusInvalidHandle, "HostMemory.With", "closed")
	_, err = tenferro.MapHostMemory(0)
	asError(t, err, tenferro.StatusInvalidArgument, "mmap", "not positive")
	_, err = tenferro.MapHostMemory(-1)
	asError(t, err, tenferro.StatusInvalidArgument, "mmap", "not positive")
}

// Zero values made by hand fail cleanly.
func TestZeroHostObjectsAreInvalidHandles(t *testing.T) {
	var h tenferro.HostBuffer
	var m tenferro.HostMemory
	var g tenferro.Registration
	asError(t, h.With(func([]byte) {}), tenferro.StatusInvalidHandle, "HostBuffer.With", "zero value")
	asError(t, m.With(func([]byte) {}), tenferro.StatusInvalidHandle, "HostMemory.With", "zero value")
	if h.Ptr() != nil || h.UnsafeBytes() != nil || m.Ptr() != nil || g.Ptr() != nil || g.Bytes() != nil {
		t.Fatal("a zero value has memory")
	}
	must(t, h.Close())
	must(t, m.Close())
	must(t, g.Close())
}
