// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

import (
	"strings"
	"testing"
)

// Close returns what tf_program_release_checked says.  Here both references
// of a program and its clone are dropped behind the package's back (through
// the C pointer): each Close then reports the release refused, and neither
// releases again.
func TestProgramCloseReportsARefusedRelease(t *testing.T) {
	rt, err := NewRuntime(0)
	if err != nil {
		t.Skipf("no runtime: %v", err)
	}
	defer rt.Close()
	if ok, err := rt.Supports(CapRuntimeCompilation); err != nil || !ok {
		t.Skipf("NVRTC cannot be loaded here (%v)", err)
	}
	p, err := rt.Compile(`extern "C" __global__ void k() {}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := p.Clone()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := programRelease(p.h.ptr); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	for _, x := range []*Program{p, q} {
		e, ok := x.Close().(*Error)
		if !ok || e.Status != StatusInvalidHandle || e.Op != "tf_program_release_checked" ||
			!strings.Contains(e.Message, "already released") {
			t.Fatalf("closing a released program: %#v", e)
		}
		if _, err := x.Image(); err == nil {
			t.Fatal("a closed Program still gives its image")
		}
	}
}

// The last Close frees the program: the library refuses its pointer then.
func TestProgramLastCloseReleases(t *testing.T) {
	rt, err := NewRuntime(0)
	if err != nil {
		t.Skipf("no runtime: %v", err)
	}
	defer rt.Close()
	if ok, err := rt.Supports(CapRuntimeCompilation); err != nil || !ok {
		t.Skipf("NVRTC cannot be loaded here (%v)", err)
	}
	p, err := rt.Compile(`extern "C" __global__ void k() {}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := p.Clone()
	if err != nil {
		t.Fatal(err)
	}
	ptr := p.h.ptr
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := programRetain(ptr); err != nil { // still held by q
		t.Fatal(err)
	}
	if err := programRelease(ptr); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	e, ok := programRetain(ptr).(*Error)
	if !ok || e.Status != StatusInvalidHandle || !strings.Contains(e.Message, "already released") {
		t.Fatalf("retaining a freed program: %#v", e)
	}
}
