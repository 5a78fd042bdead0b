// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo && !tenferro_linked

package tenferro_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeLibrary builds a libtenferro_gpu.so.1 of version 1.0.0 that exports
// the functions shim.h requires except those in omit, and none of its
// optional (1.1, 1.2) ones: a runtime is a dummy object, every other function
// succeeds without doing anything.  It skips without the sources or a C
// compiler (a GPU machine that runs the test binary alone).
func fakeLibrary(t *testing.T, omit ...string) string {
	t.Helper()
	shim := sourceFile(t, "shim.h")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%v)", err)
	}
	special := map[string]string{
		"tf_version":        "unsigned tf_version(void) { return 10000; }",
		"tf_version_string": `const char *tf_version_string(void) { return "1.0.0"; }`,
		"tf_status_string":  `const char *tf_status_string(int s) { (void)s; return "fake"; }`,
		"tf_error_info_init": "void tf_error_info_init(void *p, size_t n) {\n" +
			"    if (p && n >= 4) { memset(p, 0, n); *(uint32_t *)p = (uint32_t)n; } }",
		"tf_runtime_new":              "int tf_runtime_new(int o, void **out) { (void)o; *out = &object; return 0; }",
		"tf_runtime_new_with_options": "int tf_runtime_new_with_options(int o, const void *x, void **out) { (void)o; (void)x; *out = &object; return 0; }",
		"tf_event_new":                "int tf_event_new(void *rt, void **out) { (void)rt; *out = &object; return 0; }",
	}
	src := "#include <stdint.h>\n#include <stddef.h>\n#include <string.h>\nstatic int object;\n"
	required := regexp.MustCompile(`\b(?:F|V)\((tf_\w+),|\bR\([^,]+, (tf_\w+),`)
	start := strings.Index(shim, "#define TFGO_FUNCTIONS(")
	n := 0
	for _, m := range required.FindAllStringSubmatch(shim[start:], -1) {
		name := m[1] + m[2]
		skip := false
		for _, o := range omit {
			skip = skip || o == name
		}
		if skip {
			continue
		}
		if def, ok := special[name]; ok {
			src += def + "\n"
		} else {
			src += fmt.Sprintf("int %s(void) { return 0; }\n", name)
		}
		n++
	}
	if n < 60 {
		t.Fatalf("found %d required functions in shim.h", n)
	}
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "fake.c"), []byte(src), 0o644))
	lib := filepath.Join(dir, "libtenferro_gpu.so.1")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, filepath.Join(dir, "fake.c")).CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake library: %v\n%s", err, out)
	}
	return lib
}

// A program built with the 1.2 header runs on a 1.0 library: the runtime
// works, and each call that needs a 1.1 or 1.2 function returns an error that
// names it, says the library is too old, has StatusNotSupported and
// unwraps to ErrLibraryTooOld.
func TestOlderLibraryRefusesOnlyTheNewCalls(t *testing.T) {
	out := startChild(t, "TENFERRO_GPU_LIBRARY="+fakeLibrary(t), childRoleEnv+"=old")
	if field(t, out, "version") != "10000" || field(t, out, "runtime error") != "<nil>" {
		t.Fatalf("the 1.0 library was not used:\n%s", out)
	}
	for call, fn := range map[string][2]string{
		"HostAlloc":            {"tf_host_alloc", "1.1"},
		"HostRegister":         {"tf_host_register", "1.1"},
		"HostStats":            {"tf_host_pool_stats_init", "1.1"},
		"HostTrim":             {"tf_host_trim", "1.1"},
		"DownloadAsync":        {"tf_download_async", "1.1"},
		"UploadAsync":          {"tf_upload_async", "1.1"},
		"ProgramClone":         {"tf_program_retain", "1.1"},
		"MemoryStats":          {"tf_memory_pool_stats_init", "1.2"},
		"ResetPeakMemoryStats": {"tf_memory_reset_peak", "1.2"},
		"TrimMemory":           {"tf_memory_trim", "1.2"},
		"RecordUse":            {"tf_memory_record_use", "1.2"},
		"Capture":              {"tf_graph_capture_begin", "1.2"},
	} {
		want := "true true " + fn[0] + "|" + fn[0] + ": the loaded libtenferro_gpu (1.0.0, "
		got := field(t, out, call)
		if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "is too old: "+fn[0]+" is new in "+fn[1]) {
			t.Errorf("%s on a 1.0 library: %q, want %q... too old: %s is new in %s", call, got, want, fn[0], fn[1])
		}
	}
	// Closing a program falls back to the 1.0 tf_program_release.
	if field(t, out, "program close") != "<nil>" || field(t, out, "close") != "<nil>" {
		t.Fatalf("closing the runtime:\n%s", out)
	}
}

// A library that lacks a function of 1.0 is not a tenferro-gpu 1.x
// library: it is refused at load, naming the function.
func TestIncompleteLibraryIsRefused(t *testing.T) {
	lib := fakeLibrary(t, "tf_upload")
	out := startChild(t, "TENFERRO_GPU_LIBRARY="+lib, childRoleEnv+"=old")
	want := "tf_runtime_new: libtenferro_gpu.so.1 could not be loaded: " + lib + " lacks tf_upload"
	if got := field(t, out, "runtime error"); !strings.HasPrefix(got, want) {
		t.Fatalf("runtime error %q, want it to start with %q", got, want)
	}
}
