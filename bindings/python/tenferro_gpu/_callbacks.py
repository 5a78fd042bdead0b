"""Python callables behind the library's C callbacks.

The library calls a C function with a void *user_data.  The binding passes
a small integer token as user_data; the token finds the Python call's frame
(the callable, its arguments, and what it returned or raised).  One
trampoline per C callback type exists for the life of the process, so a
call creates no ctypes thunk, and the callable's frame lives exactly as
long as the C call.

An exception raised by the callable (any BaseException, KeyboardInterrupt
included) is caught in the trampoline, which returns CALLBACK_RAISED to the
library, and is re-raised by `call_with_callback` after the C call returns,
so it is never lost and never crosses the C ABI.

Retirement releases (tf_workspace_retire) are different: they run later,
from another call of the library, possibly on another thread, so there is
no call to re-raise in.  `retirement` keeps the callable until the library
runs it (exactly once); what it raises leaves the ctypes callback, which
reports it through sys.unraisablehook ("Exception ignored on calling
ctypes callback function"), as Python does for exceptions in finalizers.
"""

import itertools
import threading

# What a trampoline returns to the library when the callable raised; the
# library reports it as TF_ERROR_CALLBACK with this code before the binding
# re-raises the callable's own exception.
CALLBACK_RAISED = -1


class _Frame:
    __slots__ = ("fn", "args", "kwargs", "result", "exception")

    def __init__(self, fn, args, kwargs):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.result = None
        self.exception = None


# token -> frame of a call in progress (nested and concurrent calls each
# have their own).  dict operations and next() on a count are atomic.
_frames = {}
_tokens = itertools.count(1)


def _success(result):
    return 0


def trampoline(cfunctype, convert=None, status_of=_success):
    """A C function of type `cfunctype` whose last argument is user_data.

    The C arguments before user_data are passed through `convert` (if any)
    and then given to the callable ahead of its own arguments: a cuBLAS
    callback receives the handle first.  `status_of(result)` is what the
    trampoline returns to the library (0 by default); an exception it
    raises counts as the callable's.
    """
    def entry(*c_args):
        frame = _frames.get(c_args[-1])
        if frame is None:          # not a call of this binding
            return CALLBACK_RAISED
        try:
            leading = c_args[:-1]
            if convert is not None:
                leading = convert(*leading)
            frame.result = frame.fn(*leading, *frame.args, **frame.kwargs)
            return status_of(frame.result)
        except BaseException as e:  # noqa: B036 -- re-raised after the call
            frame.exception = e
            return CALLBACK_RAISED
    return cfunctype(entry)


def cublas_status(result):
    """The cublasStatus_t a cuBLAS callable returned: None counts as
    CUBLAS_STATUS_SUCCESS (0), an int is passed on, anything else is a
    TypeError raised for the callable."""
    if result is None:
        return 0
    if isinstance(result, bool) or not hasattr(result, "__index__"):
        raise TypeError(f"a cublas_enqueue callable returns a cublasStatus_t "
                        f"(an int, or None for success), not "
                        f"{type(result).__name__}")
    status = result.__index__()
    if not -(1 << 31) <= status < (1 << 31):
        raise OverflowError(f"cublasStatus_t {status} does not fit int32_t")
    return status


def call_with_callback(c_function, c_args, c_trampoline, fn, args, kwargs):
    """Call c_function(*c_args, c_trampoline, token) with `fn` behind the
    token.  Returns (status, fn's result).  Re-raises what fn raised."""
    if not callable(fn):
        raise TypeError(f"expected a callable, got {type(fn).__name__}")
    frame = _Frame(fn, args, kwargs)
    token = next(_tokens)
    _frames[token] = frame
    try:
        st = c_function(*c_args, c_trampoline, token)
    finally:
        del _frames[token]
    exception, frame.exception = frame.exception, None
    if exception is not None:
        try:
            raise exception
        finally:
            exception = None   # no frame -> traceback -> frame cycle
    return st, frame.result


# token -> (fn, args) of a retirement the library has not released yet.
_pending = {}
_pending_lock = threading.Lock()


def _release_entry(resource, user_data):
    with _pending_lock:
        work = _pending.pop(user_data, None)
    if work is None:
        return
    fn, args = work
    fn(*args)     # an exception goes to sys.unraisablehook (see above)


def retirement(c_retire, c_args, release_cfunctype, fn, args):
    """Call c_retire(*c_args, None, release trampoline, token) with fn(*args)
    behind the token.  Returns the status; on any failure the library will
    never run the release, so the callable is dropped here."""
    if not callable(fn):
        raise TypeError(f"expected a callable, got {type(fn).__name__}")
    global _release
    if _release is None:
        _release = release_cfunctype(_release_entry)
    token = next(_tokens)
    with _pending_lock:
        _pending[token] = (fn, args)
    st = c_retire(*c_args, None, _release, token)
    if st != 0:
        with _pending_lock:
            _pending.pop(token, None)
    return st


def pending_releases():
    """Number of retirements whose release has not run yet."""
    with _pending_lock:
        return len(_pending)


_release = None
