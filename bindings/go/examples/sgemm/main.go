// SPDX-License-Identifier: MIT OR Apache-2.0
// Command sgemm multiplies two matrices with cuBLAS through tenferro-gpu
// and checks the product on the CPU: uploads, a GEMM on the goroutine's
// own stream slot, downloads, errors.  docs/go.md shows this file.
package main

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/tensor4all/tenferro-gpu/bindings/go/tenferro"
)

func main() {
	if err := run(); err != nil {
		var e *tenferro.Error
		if errors.As(err, &e) {
			fmt.Printf("%s failed in %q (code %d): %s\n", e.Op, e.Call, e.Code, e.Message)
		} else {
			fmt.Println(err)
		}
		os.Exit(1)
	}
}

func run() error {
	if !tenferro.GPUAvailable() {
		return errors.New("no usable CUDA device") // or no libtenferro_gpu.so.1: see examples/gpuinfo
	}
	rt, err := tenferro.NewRuntime(0)
	if err != nil {
		return err
	}
	defer rt.Close()
	// A goroutine may run on any OS thread between two calls: a Stream
	// keeps all of its work on one stream slot, so the uploads, the GEMM
	// and the downloads below are ordered on one CUDA stream.
	worker, err := rt.NewStream(0)
	if err != nil {
		return err
	}
	defer worker.Close()

	// C (m x n) = A (m x k) * B (k x n), column-major as cuBLAS expects.
	const m, n, k = 64, 48, 32
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(i%7) - 3
	}
	for i := range b {
		b[i] = float32(i%5) - 2
	}
	da, err := tenferro.BufferFrom(worker, a)
	if err != nil {
		return err
	}
	defer da.Free()
	db, err := tenferro.BufferFrom(worker, b)
	if err != nil {
		return err
	}
	defer db.Free()
	dc, err := tenferro.NewBuffer[float32](worker, m*n)
	if err != nil {
		return err
	}
	defer dc.Free()

	// The callback gets the slot's cuBLAS handle; Sgemm calls the
	// cublasSgemm_v2 of the cuBLAS the library loaded.
	err = worker.CublasEnqueue(tenferro.PointerModeHost, func(c *tenferro.Cublas) error {
		return c.Sgemm(tenferro.OpN, tenferro.OpN, m, n, k, 1, da.Ptr(), m, db.Ptr(), k, 0, dc.Ptr(), m)
	})
	if err != nil {
		return err
	}
	got, err := dc.ToSlice() // waits for the GEMM: same Stream
	if err != nil {
		return err
	}
	first, err := tenferro.DownloadScalar[float32](worker, dc.Ptr())
	if err != nil {
		return err
	}

	worst := 0.0
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			want := float32(0)
			for p := 0; p < k; p++ {
				want += a[i+p*m] * b[p+j*k]
			}
			worst = math.Max(worst, math.Abs(float64(got[i+j*m]-want)))
		}
	}
	if worst != 0 || first != got[0] {
		return fmt.Errorf("the product differs from the CPU's by %g", worst)
	}
	fmt.Printf("C[0,0] = %g; the %dx%d product matches the CPU\n", first, m, n)
	return nil
}
