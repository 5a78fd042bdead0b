package tenferro_test

import (
	"errors"
	"fmt"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

// A complete program: create a runtime, give this goroutine a stable stream
// slot, run work with the primary context current, wait for it.
func Example() {
	if !tenferro.GPUAvailable() {
		fmt.Println("ok") // nothing to run on
		return
	}
	rt, err := tenferro.NewRuntime(0)
	if err != nil {
		fmt.Println("no runtime:", err)
		return
	}
	defer rt.Close()

	worker, err := rt.BindSlot(0) // same stream from any OS thread
	if err != nil {
		fmt.Println(err)
		return
	}
	defer worker.Close()

	err = worker.WithContext(func() error {
		// The primary context is current on this OS thread: call cuBLAS,
		// launch kernels on worker.Stream(), ...
		return nil
	})
	if err == nil {
		err = worker.Sync()
	}
	var e *tenferro.Error
	if errors.As(err, &e) {
		fmt.Println(e.Op, e.Call, e.Code, e.Message)
		return
	}
	fmt.Println("ok")
	// Output: ok
}
