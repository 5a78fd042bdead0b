// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro

import "testing"

// The limits and defaults spelled as Go constants (so that a build without
// cgo has them) are those of the header this build compiles against.  A
// newer header may legitimately raise a limit; then this test says which
// constant to update.
func TestConstantsMatchTheHeader(t *testing.T) {
	for name, v := range headerLimits {
		if v[0] != v[1] {
			t.Errorf("%s is %d, the header says %d", name, v[0], v[1])
		}
	}
	if len(headerLimits) != 13 {
		t.Fatalf("%d constants compared", len(headerLimits))
	}
	if DefaultMemoryReleaseThreshold != headerReleaseThreshold {
		t.Errorf("DefaultMemoryReleaseThreshold is %d, the header says %d", DefaultMemoryReleaseThreshold, headerReleaseThreshold)
	}
}

// With the library, DefaultOptions is what the library's
// tf_runtime_options_init writes; without, the header's defaults: the same.
func TestDefaultOptionsWithoutTheLibraryAreTheLibrarys(t *testing.T) {
	lib, ok := libraryDefaultOptions()
	if !ok {
		t.Skip("the library is not available")
	}
	want := Options{StreamSlots: defaultStreamSlots, CublasWorkspaceBytes: defaultCublasWorkspaceBytes,
		RetirementCapacity: defaultRetirementCapacity}
	if lib != want {
		t.Fatalf("the library's defaults %+v, the header's %+v", lib, want)
	}
}

// Without the library, Status.String gives the constant's name; statusNames
// must list every status in order.
func TestStatusNamesFollowTheConstants(t *testing.T) {
	for s, name := range map[Status]string{
		StatusOK: "StatusOK", StatusLibraryNotFound: "StatusLibraryNotFound", StatusInternal: "StatusInternal",
	} {
		if statusNames[s] != name {
			t.Errorf("statusNames[%d] = %q, want %q", s, statusNames[s], name)
		}
	}
	if len(statusNames) != int(StatusInternal)+1 {
		t.Fatalf("%d names for %d statuses", len(statusNames), StatusInternal+1)
	}
}
