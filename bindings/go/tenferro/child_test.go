//go:build cgo

package tenferro_test

import (
	"errors"
	"fmt"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// childRoleEnv makes the test binary, started again by a test, act as a
// small program instead of running the tests (see TestMain).
const childRoleEnv = "TENFERRO_GO_TEST_CHILD"

// runChild is what a program that merely can use a GPU does: try, and
// report "no GPU" rather than fail.  It prints one "key: value" line per
// fact for the test that started it, and exits 0.
func runChild(role string) int {
	if role != "probe" {
		fmt.Println("unknown child role", role)
		return 2
	}
	path, pathErr := tenferro.LibraryPath()
	fmt.Printf("library: %s\n", path)
	rt, err := tenferro.NewRuntime(0)
	if err == nil {
		rt.Close()
	}
	fmt.Printf("runtime error: %v\n", err)
	fmt.Printf("not available: %v %v\n", errors.Is(err, tenferro.ErrNotAvailable), errors.Is(pathErr, tenferro.ErrNotAvailable))
	fmt.Printf("status: %v\n", errors.Is(err, tenferro.StatusLibraryNotFound))
	fmt.Printf("gpu available: %v\n", tenferro.GPUAvailable())
	fmt.Printf("version: %d\n", tenferro.Version())
	return 0
}
