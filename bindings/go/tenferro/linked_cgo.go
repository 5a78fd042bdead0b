// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build cgo && tenferro_linked

package tenferro

// With the build tag tenferro_linked the library is linked as an ordinary
// dependency (found through pkg-config at build time, by the dynamic loader
// at start-up) instead of being opened at run time: a program then does not
// start where libtenferro_gpu.so.1 is absent.  See the package
// documentation, "Loading the library".

// #cgo CFLAGS: -DTFGO_LINKED
// #cgo pkg-config: tenferro_gpu
import "C"
