package tenferro

// #include <stdint.h>
import "C"

import "math"

// int32Arg converts a Go int for an int32_t parameter, refusing values that
// would silently wrap.
func int32Arg(op, name string, v int) (C.int32_t, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, bindingError(StatusInvalidArgument, op, "%s %d does not fit in int32_t", name, v)
	}
	return C.int32_t(v), nil
}

// uint32Arg converts a Go int for a uint32_t field.
func uint32Arg(op, name string, v int) (C.uint32_t, error) {
	if v < 0 || v > math.MaxUint32 {
		return 0, bindingError(StatusInvalidArgument, op, "%s %d does not fit in uint32_t", name, v)
	}
	return C.uint32_t(v), nil
}
