# SPDX-License-Identifier: MIT OR Apache-2.0
"""Python callables behind the library's C callbacks.

The library calls a C function with a void *user_data.  For the callbacks
that run during the call (tf_with_context, tf_cublas_enqueue,
tf_stream_enqueue) the binding passes the call's frame itself as user_data
(a Python list: the callable, its arguments, what it returned, what it
raised), which the caller keeps alive for the whole C call.  One
trampoline per C callback type exists for the life of the process, so a
call creates no ctypes thunk and looks nothing up.

An exception raised by the callable (any BaseException, KeyboardInterrupt
included) is caught in the trampoline, which returns CALLBACK_RAISED to the
library, and is re-raised by the caller after the C call returns, so it is
never lost and never crosses the C ABI.

Retirement releases (tf_workspace_retire) are different: they run later,
from another call of the library, possibly on another thread, so there is
no call to re-raise in.  `retirement` keeps the callable until the library
runs it (exactly once); what it raises leaves the ctypes callback, which
reports it through sys.unraisablehook ("Exception ignored on calling
ctypes callback function"), as Python does for exceptions in finalizers.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from . import _capi, _runtimes

if TYPE_CHECKING:
    from .runtime import Runtime

# What a trampoline returns to the library when the callable raised; the
# library reports it as TF_ERROR_CALLBACK with this code before the binding
# re-raises the callable's own exception.
CALLBACK_RAISED = -1

# A frame: [callable, args, kwargs, result, exception].
FN, ARGS, KWARGS, RESULT, EXCEPTION = range(5)
Frame = List[Any]


def new_frame(fn: object, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Frame:
    """The frame of one call; refuses a non-callable before any C call."""
    if not callable(fn):
        raise TypeError(f"expected a callable, got {type(fn).__name__}")
    return [fn, args, kwargs, None, None]


def _with_context_entry(frame: Frame) -> int:
    try:
        frame[RESULT] = frame[FN](*frame[ARGS], **frame[KWARGS])
        return 0
    except BaseException as e:  # noqa: B036 -- re-raised after the call
        frame[EXCEPTION] = e
        return CALLBACK_RAISED


def _stream_entry(stream: Optional[int], frame: Frame) -> int:
    try:
        frame[RESULT] = frame[FN](stream or 0, *frame[ARGS], **frame[KWARGS])
        return 0
    except BaseException as e:  # noqa: B036
        frame[EXCEPTION] = e
        return CALLBACK_RAISED


def _cublas_entry(handle: Optional[int], stream: Optional[int], frame: Frame) -> int:
    try:
        frame[RESULT] = frame[FN](handle or 0, stream or 0, *frame[ARGS], **frame[KWARGS])
        return cublas_status(frame[RESULT])
    except BaseException as e:  # noqa: B036
        frame[EXCEPTION] = e
        return CALLBACK_RAISED


def cublas_status(result: object) -> int:
    """The cublasStatus_t a cuBLAS callable returned: None counts as
    CUBLAS_STATUS_SUCCESS (0), an int is passed on, anything else is a
    TypeError raised for the callable."""
    if result is None:
        return 0
    index = getattr(result, "__index__", None)
    if isinstance(result, bool) or index is None:
        raise TypeError(f"a cublas_enqueue callable returns a cublasStatus_t "
                        f"(an int, or None for success), not "
                        f"{type(result).__name__}")
    status: int = index()
    if not -(1 << 31) <= status < (1 << 31):
        raise OverflowError(f"cublasStatus_t {status} does not fit int32_t")
    return status


def reraise(frame: Frame) -> None:
    """Raise what the callable raised, if anything, dropping the frame's
    reference so no traceback -> frame cycle is left behind."""
    exception = frame[EXCEPTION]
    if exception is not None:
        frame[EXCEPTION] = None
        try:
            raise exception
        finally:
            exception = None


WITH_CONTEXT = _capi.WITH_CONTEXT_FN(_with_context_entry)
STREAM = _capi.STREAM_FN(_stream_entry)
CUBLAS = _capi.CUBLAS_FN(_cublas_entry)


# token -> (fn, args, identity, slot) of a retirement the library has not
# released yet.
_pending: Dict[int, Tuple[Callable[..., object], Tuple[Any, ...], int, int]] = {}
_pending_lock = threading.RLock()   # re-entrant, as _claims._lock
_tokens = itertools.count(1)


def _release_entry(resource: Optional[int], user_data: Optional[int]) -> None:
    with _pending_lock:
        work = _pending.pop(user_data or 0, None)
    if work is None:
        return
    fn, args, identity, slot = work
    _runtimes.retired(identity, slot)
    fn(*args)     # an exception goes to sys.unraisablehook (see above)


_release: Any = None


def retirement(runtime: "Runtime", fn: Callable[..., object], args: Tuple[Any, ...]) -> int:
    """tf_workspace_retire on the slot `runtime`'s calls use here, with
    fn(*args) behind a token.  Returns the status; on any failure the
    library will never run the release, so the callable is dropped here.
    The runtime notes the retirement until it is released ("NOTE the last
    reference drains" in _runtimes.py)."""
    if not callable(fn):
        raise TypeError(f"expected a callable, got {type(fn).__name__}")
    global _release
    if _release is None:
        _release = _capi.RELEASE_FN(_release_entry)
    api = _capi.api()
    target = runtime._target()
    slot = ctypes.c_int32()
    st = int(api.tf_runtime_current_slot(target._ref(), ctypes.byref(slot)))
    if st != 0:
        return st
    identity = target._identity
    token = next(_tokens)
    _runtimes.retiring(identity, slot.value)
    with _pending_lock:
        _pending[token] = (fn, args, identity, slot.value)
    st = int(api.tf_workspace_retire(target._ref(), None, _release, ctypes.c_void_p(token)))
    if st != 0:
        with _pending_lock:
            dropped = _pending.pop(token, None)
        if dropped is not None:
            _runtimes.retired(identity, slot.value)
    return st


def pending_releases() -> int:
    """Number of retirements whose release has not run yet."""
    with _pending_lock:
        return len(_pending)
