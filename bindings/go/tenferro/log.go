// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

import (
	"fmt"
	"os"
)

// LogLevel is the severity of a library log message (enum tf_log_level).
type LogLevel int32

// Log levels.
const (
	LogWarning LogLevel = 2 // something was leaked or could not be restored
	LogError   LogLevel = 3 // a failure nobody else can be told about
)

// SetLogCallback routes the library's warnings (a context that could not be
// restored, resources leaked at teardown) to fn, or back to the default
// (stderr, prefixed "tenferro-gpu: ") when fn is nil (tf_set_log_callback).
//
// fn may be called from any goroutine's thread, concurrently, including
// from a Runtime finalizer; it must not block for long.  Once
// SetLogCallback returns, the previous fn is never called again.  Calling
// SetLogCallback from inside fn returns an error with StatusRuntimeState.
// A panic in fn is reported on stderr and does not propagate.
func SetLogCallback(fn func(level LogLevel, message string)) error {
	return setLogCallback(fn)
}

// runLog calls a log callback for the library.
func runLog(fn func(LogLevel, string), level LogLevel, msg string) {
	defer func() {
		// A panic must not unwind through the library's C frames.
		if v := recover(); v != nil {
			fmt.Fprintf(os.Stderr, "tenferro: log callback panicked (%v) on: %s\n", v, msg)
		}
	}()
	fn(level, msg)
}
