// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo

package tenferro_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// sourceFile reads a file of the checkout; the test skips where the
// binary runs without the sources (a GPU machine).
func sourceFile(t *testing.T, path string) string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("the sources are not here (%v)", err)
	}
	return string(text)
}

func sortedKeys(m map[string]bool) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The one list of functions in shim.h (from which the dlopen table and the
// C wrappers are made) holds exactly the header's functions that
// UNBOUND.txt does not leave out, and each of them is called: from Go
// (C.go_<name>) or from shim.c (the two the error capture uses, and the
// copies a failure is noted after, through their wrappers).
func TestShimListsTheBoundFunctions(t *testing.T) {
	header := sourceFile(t, filepath.Join("..", "..", "..", "include", "tenferro_gpu.h"))
	shim := sourceFile(t, "shim.h")
	declared := map[string]bool{}
	for _, m := range regexp.MustCompile(`TF_API[^;{}]*?\b(tf_\w+)\s*\(`).FindAllStringSubmatch(header, -1) {
		declared[m[1]] = true
	}
	unbound := map[string]bool{}
	for _, line := range strings.Split(sourceFile(t, filepath.Join("..", "UNBOUND.txt")), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(name, "tf_") {
			unbound[name] = true
		}
	}
	start := strings.Index(shim, "#define TFGO_FUNCTIONS(F, R, V, OF, OV)")
	end := strings.Index(shim[start:], "\n\n")
	listed := map[string]bool{}
	entry := regexp.MustCompile(`\b(?:F|V)\((tf_\w+),|\bR\([^,]+, (tf_\w+),|\bO[FV]\("[0-9.]+", (tf_\w+),`)
	for _, m := range entry.FindAllStringSubmatch(shim[start:start+end], -1) {
		listed[m[1]+m[2]+m[3]] = true
	}
	var goSources, shimC string
	files, _ := filepath.Glob("*_cgo.go")
	for _, f := range files {
		goSources += sourceFile(t, f)
	}
	shimC = sourceFile(t, "shim.c")
	for name := range declared {
		if !listed[name] && !unbound[name] {
			t.Errorf("%s is declared by the header but neither in TFGO_FUNCTIONS nor in UNBOUND.txt", name)
		}
		if listed[name] && unbound[name] {
			t.Errorf("%s is in TFGO_FUNCTIONS and in UNBOUND.txt", name)
		}
	}
	for _, name := range sortedKeys(listed) {
		if !declared[name] {
			t.Errorf("TFGO_FUNCTIONS lists %s, which the header does not declare", name)
		}
		if !strings.Contains(goSources, "C.go_"+name+"(") && !strings.Contains(shimC, "TFGO_FN("+name+")") &&
			!strings.Contains(shimC, " go_"+name+"(") {
			t.Errorf("TFGO_FUNCTIONS lists %s, but nothing calls it", name)
		}
	}
	if len(listed) < 60 || len(declared) != len(listed)+len(unbound) {
		t.Fatalf("%d functions declared, %d listed, %d unbound", len(declared), len(listed), len(unbound))
	}
	t.Logf("%d functions declared: %d in TFGO_FUNCTIONS, %d unbound", len(declared), len(listed), len(unbound))
}
