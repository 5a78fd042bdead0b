// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"fmt"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

func TestVersionMatchesHeader(t *testing.T) {
	if got := tenferro.Version(); got != tenferro.HeaderVersion {
		t.Fatalf("library version %d, header %d", got, tenferro.HeaderVersion)
	}
	v := tenferro.HeaderVersion
	want := fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	if got := tenferro.VersionString(); got != want {
		t.Fatalf("VersionString %q, want %q", got, want)
	}
}

func TestStatusStringsComeFromTheLibrary(t *testing.T) {
	cases := map[tenferro.Status]string{
		tenferro.StatusOK:              "success",
		tenferro.StatusInvalidArgument: "invalid argument",
		tenferro.StatusDeviceFault:     "device fault: context unusable",
		tenferro.StatusInternal:        "internal error",
		tenferro.Status(12345):         "unknown status",
	}
	for s, want := range cases {
		if s.String() != want || s.Error() != want {
			t.Errorf("status %d: String %q, Error %q, want %q", int32(s), s.String(), s.Error(), want)
		}
	}
	if tenferro.StatusInternal != 17 || tenferro.StatusCallback != 12 {
		t.Fatal("status values differ from the header's")
	}
}
