# SPDX-License-Identifier: MIT OR Apache-2.0
"""Routing the library's warnings (restore and teardown failures) to Python.

The library's default writes them to stderr prefixed "tenferro-gpu: ".
set_log_callback(fn) sends them to fn(level, message) instead; the library
calls it from whichever thread hit the problem, possibly several at once.
log_to_logging() is the usual choice:

    tenferro_gpu.log_to_logging()          # logger "tenferro_gpu"
"""

from __future__ import annotations

import atexit
import enum
import logging
import sys
import threading
import traceback
from typing import Any, Callable, Optional, Union

from . import _capi

LogFn = Callable[[Union["LogLevel", int], str], object]


class LogLevel(enum.IntEnum):
    """enum tf_log_level"""
    WARNING = 2
    ERROR = 3


_lock = threading.Lock()
_installed: Any = None       # the C function the library holds, kept alive
_in_callback = threading.local()


def _null_log_fn() -> Any:
    """A NULL tf_log_fn: the library's default."""
    null: Any = _capi.LOG_FN
    return null()


def _level(value: int) -> Union[LogLevel, int]:
    try:
        return LogLevel(value)
    except ValueError:
        return value


def _c_callback(fn: LogFn) -> Any:
    def entry(level: int, message: Optional[bytes], _user_data: Optional[int]) -> None:
        outer = getattr(_in_callback, "depth", 0)
        _in_callback.depth = outer + 1
        try:
            fn(_level(level), (message or b"").decode("utf-8", "replace"))
        except BaseException:  # noqa: B036 -- nobody to hand it to
            sys.stderr.write("tenferro-gpu: the Python log callback raised:\n")
            traceback.print_exc()
        finally:
            _in_callback.depth = outer
    return _capi.LOG_FN(entry)


def set_log_callback(fn: Optional[LogFn]) -> None:
    """Send log messages to fn(level: LogLevel, message: str), or back to
    the library's default (stderr) with None.

    When this returns, the previous callback is never called again.  It
    waits for calls of the previous callback in progress on other threads.
    Raises RuntimeStateError when called from inside a log callback.
    """
    api = _capi.api()
    if getattr(_in_callback, "depth", 0):
        # The library refuses this (it would wait for the very callback
        # that is calling); skip the lock, which another thread may hold
        # while it waits for this callback to return.
        _capi.check(api.tf_set_log_callback(_null_log_fn(), None))
        return
    if fn is not None and not callable(fn):
        raise TypeError(f"expected a callable or None, got {type(fn).__name__}")
    global _installed
    with _lock:
        c_fn = _c_callback(fn) if fn is not None else _null_log_fn()
        _capi.check(api.tf_set_log_callback(c_fn, None))
        _installed = c_fn if fn is not None else None


def log_to_logging(logger: Union[str, logging.Logger] = "tenferro_gpu") -> None:
    """Send log messages to a `logging` logger (a name or a Logger):
    WARNING to logger.warning, ERROR to logger.error."""
    target = logger if isinstance(logger, logging.Logger) else logging.getLogger(logger)

    def forward(level: Union[LogLevel, int], message: str) -> None:
        target.log(logging.ERROR if level == LogLevel.ERROR else logging.WARNING,
                   "%s", message)
    set_log_callback(forward)


@atexit.register
def _restore_default_at_exit() -> None:
    # Late in interpreter shutdown Python code can no longer run safely;
    # teardown warnings from then on go to stderr.
    if _installed is not None:
        set_log_callback(None)
