// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import "math"

// int32Arg converts a Go int for an int32_t parameter, refusing values that
// would silently wrap.
func int32Arg(op, name string, v int) (int32, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, bindingError(StatusInvalidArgument, op, "%s %d does not fit in int32_t", name, v)
	}
	return int32(v), nil
}

// uint32Arg converts a Go int for a uint32_t field.
func uint32Arg(op, name string, v int) (uint32, error) {
	if v < 0 || v > math.MaxUint32 {
		return 0, bindingError(StatusInvalidArgument, op, "%s %d does not fit in uint32_t", name, v)
	}
	return uint32(v), nil
}

// sizeArg converts a Go int for a size_t parameter.
func sizeArg(op, name string, v int) (uintptr, error) {
	if v < 0 {
		return 0, bindingError(StatusInvalidArgument, op, "%s %d is negative", name, v)
	}
	return uintptr(v), nil
}
