// SPDX-License-Identifier: MIT OR Apache-2.0
//go:build unix

package tenferro

import (
	"errors"
	"syscall"
)

func mapAnonymous(op string, bytes int) ([]byte, error) {
	mem, err := syscall.Mmap(-1, 0, bytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, systemError(op, err, "%d bytes: %v", bytes, err)
	}
	return mem, nil
}

func unmapAnonymous(op string, mem []byte) error {
	if err := syscall.Munmap(mem); err != nil {
		return systemError(op, err, "%v", err)
	}
	return nil
}

// systemError is a failed system call's error, with its errno.
func systemError(op string, err error, format string, args ...interface{}) *Error {
	status := StatusInvalidArgument
	if errors.Is(err, syscall.ENOMEM) {
		status = StatusOutOfMemory
	}
	e := bindingError(status, op, format, args...)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		e.Domain, e.Code = CodeSystem, int32(errno)
	}
	return e
}
