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
"""

import itertools

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


def trampoline(cfunctype, convert=None):
    """A C function of type `cfunctype` whose last argument is user_data.

    The C arguments before user_data are passed through `convert` (if any)
    and then given to the callable ahead of its own arguments: a cuBLAS
    callback receives the handle first.
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
        except BaseException as e:  # noqa: B036 -- re-raised after the call
            frame.exception = e
            return CALLBACK_RAISED
        return 0
    return cfunctype(entry)


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
