// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build !unix

package tenferro

func mapAnonymous(op string, bytes int) ([]byte, error) {
	return nil, bindingError(StatusNotSupported, op, "this system has no mmap")
}

func unmapAnonymous(op string, mem []byte) error {
	return bindingError(StatusNotSupported, op, "this system has no mmap")
}
