// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo && !tenferro_linked

package tenferro_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// startChild copies this test binary where its rpath ($ORIGIN/../lib, see
// make go-test-binary) finds no library, and runs it as a probe program
// (runChild) with the loader's path emptied and env added; it returns the
// probe's output, failing the test unless the program started and exited 0.
func startChild(t *testing.T, env ...string) string {
	t.Helper()
	self, err := os.Executable()
	must(t, err)
	dir := filepath.Join(t.TempDir(), "x", "bin") // $ORIGIN/../lib: x/lib, absent
	must(t, os.MkdirAll(dir, 0o755))
	exe := filepath.Join(dir, "probe")
	copyFile(t, self, exe)
	cmd := exec.Command(exe)
	cmd.Env = append(environWithout("LD_LIBRARY_PATH", "TENFERRO_GPU_LIBRARY", "TF_TEST_MODE"),
		"LD_LIBRARY_PATH="+t.TempDir(), childRoleEnv+"=probe")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the program did not start and exit 0 without the library: %v\n%s", err, out)
	}
	return string(out)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	must(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	must(t, err)
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	must(t, out.Close())
}

func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			keep = keep && name != n
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}

// field is the value of "key: value" in a probe's output.
func field(t *testing.T, out, key string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, key+": ") {
			return line[len(key)+2:]
		}
	}
	t.Fatalf("the probe printed no %q:\n%s", key, out)
	return ""
}

// A program built with this package starts where libtenferro_gpu.so.1 is
// absent (the library is opened at the first call, not by the loader at
// start-up, which would exit 127), and every entry point reports
// ErrNotAvailable.
func TestProgramStartsWithoutTheLibrary(t *testing.T) {
	out := startChild(t)
	if lib := field(t, out, "library"); lib != "" {
		t.Skipf("the loader finds libtenferro_gpu.so.1 anyway (%s): it cannot be made absent here", lib)
	}
	if field(t, out, "not available") != "true true" || field(t, out, "status") != "true" ||
		field(t, out, "gpu available") != "false" || field(t, out, "version") != "0" {
		t.Fatalf("the program without the library:\n%s", out)
	}
	want := "tf_runtime_new: libtenferro_gpu.so.1 could not be loaded: libtenferro_gpu.so.1: cannot open shared object file"
	if !strings.HasPrefix(field(t, out, "runtime error"), want) {
		t.Fatalf("runtime error %q, want it to start with %q", field(t, out, "runtime error"), want)
	}
	// Where it looked and what to do next, as the Python binding says.
	for _, next := range []string{"TENFERRO_GPU_LIBRARY (not set)", "LD_LIBRARY_PATH=",
		"make install", "ldconfig", "set TENFERRO_GPU_LIBRARY to its absolute path"} {
		if !strings.Contains(field(t, out, "runtime error"), next) {
			t.Fatalf("runtime error %q does not say %q", field(t, out, "runtime error"), next)
		}
	}
}

// TENFERRO_GPU_LIBRARY names the file to load, and only it: an absolute
// path is loaded although the loader's path holds no library; a relative
// one or a missing file is reported, never replaced by a search.
func TestLibraryOverride(t *testing.T) {
	requireDevice(t)
	loaded, err := tenferro.LibraryPath()
	must(t, err)
	path, err := filepath.Abs(loaded)
	must(t, err)
	out := startChild(t, "TENFERRO_GPU_LIBRARY="+path)
	if got := field(t, out, "library"); got != path {
		t.Fatalf("TENFERRO_GPU_LIBRARY=%s loaded %q\n%s", path, got, out)
	}
	out = startChild(t, "TENFERRO_GPU_LIBRARY=lib/libtenferro_gpu.so.1")
	if e := field(t, out, "runtime error"); !strings.Contains(e, "TENFERRO_GPU_LIBRARY=lib/libtenferro_gpu.so.1 is not an absolute path") {
		t.Fatalf("a relative override: %q", e)
	}
	missing := filepath.Join(t.TempDir(), "libtenferro_gpu.so.1")
	out = startChild(t, "TENFERRO_GPU_LIBRARY="+missing)
	if e := field(t, out, "runtime error"); !strings.Contains(e, missing+": cannot open shared object file") ||
		!strings.Contains(e, "the only place tried") || field(t, out, "not available") != "true true" {
		t.Fatalf("a missing override: %q\n%s", e, out)
	}
}
