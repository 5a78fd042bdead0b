package tenferro

// #include "shim.h"
import "C"

import (
	"fmt"
	"os"
	"runtime/cgo"
	"sync"
)

// LogLevel is the severity of a library log message (enum tf_log_level).
type LogLevel int32

// Log levels.
const (
	LogWarning = LogLevel(C.TF_LOG_WARNING) // something was leaked or could not be restored
	LogError   = LogLevel(C.TF_LOG_ERROR)   // a failure nobody else can be told about
)

// logState is the installed Go callback.  logMu serializes SetLogCallback so
// that the handle it frees is exactly the one the library stopped calling.
var (
	logMu     sync.Mutex
	logHandle cgo.Handle // 0: the library's default (stderr)
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
	if C.tfgo_in_log_callback() != 0 {
		// The library refuses this itself; do not wait for logMu, which a
		// SetLogCallback on another thread may hold while it waits for
		// this very callback to finish.
		return takeError(C.go_tf_set_log_callback(0))
	}
	logMu.Lock()
	defer logMu.Unlock()
	var h cgo.Handle
	if fn != nil {
		h = cgo.NewHandle(fn)
	}
	if err := takeError(C.go_tf_set_log_callback(C.uintptr_t(h))); err != nil {
		if h != 0 {
			h.Delete()
		}
		return err
	}
	if logHandle != 0 {
		logHandle.Delete()
	}
	logHandle = h
	return nil
}

//export tfgoLog
func tfgoLog(h C.uintptr_t, level C.int32_t, message *C.char) {
	fn := cgo.Handle(h).Value().(func(LogLevel, string))
	msg := C.GoString(message)
	defer func() {
		// A panic must not unwind through the library's C frames.
		if v := recover(); v != nil {
			fmt.Fprintf(os.Stderr, "tenferro: log callback panicked (%v) on: %s\n", v, msg)
		}
	}()
	fn(LogLevel(level), msg)
}
